// A shared library without the accgraph entry point: must be rejected.
extern "C" __attribute__((visibility("default"))) int some_other_symbol(void) { return 42; }
