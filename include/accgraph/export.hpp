// Symbol visibility for the accgraph shared library: the public API is exported, the rest hidden.
#pragma once

#if defined(_WIN32)
#if defined(ACCGRAPH_BUILDING_LIBRARY)
#define ACCGRAPH_API __declspec(dllexport)
#else
#define ACCGRAPH_API __declspec(dllimport)
#endif
#else
#define ACCGRAPH_API __attribute__((visibility("default")))
#endif
