// ClockSampling for vulkan (backend.hpp, clock.sample) through calibrated timestamps
// (VK_EXT_calibrated_timestamps or VK_KHR_calibrated_timestamps).
#include <fmt/format.h>

#include "vulkan_backend.hpp"

namespace accgraph::detail::vulkan {

// Note [Calibrated samples]: vkGetCalibratedTimestamps reads several time domains at nearly one
// instant, but its host domains are CLOCK_MONOTONIC(_RAW), not the CLOCK_REALTIME of a
// ClockSample. So each sample reads CLOCK_REALTIME, then the device domain alone through
// vkGetCalibratedTimestamps (the driver reads the device's timestamp counter, the clock of the
// timestamp queries behind the markers), then CLOCK_REALTIME again: the device read lies
// between the two host reads, as (clock.sample) asks, and the round trip is one driver call
// (about a microsecond on lavapipe; a register read on a GPU), not a launch. The ticks are
// converted exactly as the markers convert theirs (TickConverter::ticks_to_ns of the masked
// value).
void sample_calibrated(const DeviceState& device, timing::ClockSample* samples, size_t count) {
  if (device.get_calibrated == nullptr)
    throw Error(ErrorCode::Unsupported,
                fmt::format("sample_clock: vulkan device {} ('{}') has no calibrated timestamps "
                            "with a device time domain (VK_EXT_calibrated_timestamps or "
                            "VK_KHR_calibrated_timestamps), so its clock cannot be read against "
                            "the host's",
                            device.index, device.name),
                kBackendName);
  VkCalibratedTimestampInfoEXT info =
      info_struct<VkCalibratedTimestampInfoEXT>(VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT);
  info.timeDomain = VK_TIME_DOMAIN_DEVICE_EXT;
  for (size_t i = 0; i < count; ++i) {
    uint64_t ticks = 0;
    uint64_t deviation = 0;
    const uint64_t before = timing::realtime_ns();
    const VkResult result = device.get_calibrated(device.device, 1, &info, &ticks, &deviation);
    const uint64_t after = timing::realtime_ns();
    if (result != VK_SUCCESS)
      NativeCall<VkCall>::fail(result, "vkGetCalibratedTimestampsEXT",
                               fmt::format("sample_clock: sample {} of {}", i + 1, count));
    samples[i] = {before, device.timer.ticks_to_ns(ticks & device.timer.mask()), after};
  }
}

}  // namespace accgraph::detail::vulkan
