# The Level Zero backend's detection, run by accgraph_backend() (cmake/AccgraphBackends.cmake):
# the loader's pkg-config module (PkgConfig::LevelZero, which the backend links).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LevelZero QUIET IMPORTED_TARGET libze_loader)
endif()
if(LevelZero_FOUND)
  set(accgraph_backend_found ON)
else()
  set(accgraph_backend_missing "pkg-config found no libze_loader: install libze-dev (Debian)")
endif()
