// The spin shader behind Stream::delay on vulkan: one invocation that returns once the device's
// realtime shader clock (VK_KHR_shader_clock, shaderDeviceClock) advanced by `ticks` from its
// first read. The backend converts nanoseconds to ticks with a rate it measures at start-up
// against timestamp queries (Note [Spin shader] in backend.cpp). Compiled to SPIR-V at build
// time by glslangValidator (backends/vulkan/CMakeLists.txt).
#version 450
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Spin {
  uint64_t ticks;
} spin;

void main() {
  const uint64_t start = clockRealtimeEXT();
  while (clockRealtimeEXT() - start < spin.ticks) {
  }
}
