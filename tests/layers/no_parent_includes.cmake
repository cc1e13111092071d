# No "../" include in library code (core, registry, support, timing, backends, include): a layer
# reaches another only through the targets of Note [Layer targets].
# -DROOT=<source tree>
set(found "")
set(total 0)
foreach(folder IN ITEMS core registry support timing backends include)
  file(GLOB_RECURSE files "${ROOT}/${folder}/*.cpp" "${ROOT}/${folder}/*.hpp"
       "${ROOT}/${folder}/*.h" "${ROOT}/${folder}/*.cu" "${ROOT}/${folder}/*.cuh")
  foreach(file IN LISTS files)
    file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"\\.\\./")
    foreach(line IN LISTS lines)
      file(RELATIVE_PATH rel "${ROOT}" "${file}")
      string(APPEND found "\n  ${rel}: ${line}")
    endforeach()
  endforeach()
  list(LENGTH files count)
  math(EXPR total "${total}+${count}")
endforeach()
if(total LESS 50)
  message(FATAL_ERROR "only ${total} library sources found under ${ROOT}: is ROOT the source tree?")
endif()
if(found)
  message(FATAL_ERROR "library sources include with \"../\" (link the target that exposes the "
                      "header instead, Note [Layer targets]):${found}")
endif()
message("${total} library sources, none includes with \"../\"")
