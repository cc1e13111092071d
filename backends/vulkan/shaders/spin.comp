// The spin shader behind Stream::delay on vulkan: one invocation that lasts a given time, in one
// of two modes chosen per device at start-up (Note [Spin shader] in backend.cpp):
//   mode 0 (clock): returns once the device's realtime shader clock (VK_KHR_shader_clock,
//     shaderDeviceClock) advanced by `amount` ticks; at most `amount` iterations, so a clock
//     that does not advance cannot hang the device (an iteration takes at least one tick of
//     any clock the backend accepts);
//   mode 1 (work): `amount` iterations of a dependent integer recurrence, whose result is
//     stored only when it hits one unlikely value, so the compiler must run every iteration.
//     Mesa 22.3's lavapipe ends a shader's loops after 65,535 iterations in all (gallivm's
//     LP_MAX_TGSI_LOOP_ITERATIONS), so the backend asks one dispatch for at most 32,768
//     iterations and splits a longer spin into dispatches separated by barriers.
// Compiled to SPIR-V at build time by glslangValidator (backends/vulkan/CMakeLists.txt).
#version 450
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Spin {
  uint64_t amount;
  uint mode;
} spin;

layout(std430, set = 0, binding = 0) buffer Sink {
  uint value;
} sink;

void main() {
  if (spin.mode == 0u) {
    const uint64_t start = clockRealtimeEXT();
    for (uint64_t i = 0; i < spin.amount; ++i) {
      if (clockRealtimeEXT() - start >= spin.amount) break;
    }
  } else {
    uint x = 1u;
    for (uint64_t i = 0; i < spin.amount; ++i) x = x * 1664525u + 1013904223u;
    if (x == 0x2545F491u) sink.value = x;
  }
}
