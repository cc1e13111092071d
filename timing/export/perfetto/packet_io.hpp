// Reading and writing a Perfetto trace one packet at a time: a trace file is the serialised
// `Trace { repeated TracePacket packet = 1; }`, i.e. each packet as tag 0x0A, a varint length
// and the packet's bytes, so neither side needs the whole trace in memory.
#pragma once

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <ostream>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>

#include "perfetto_trace.pb.h"

namespace accgraph::timing::detail {

/// Frames packets into a 64 KiB buffer that goes to `out` whenever it is full.
class PacketWriter {
 public:
  explicit PacketWriter(std::ostream& out) : out_(out) { buffer_.reserve(kChunkBytes + 4096); }
  /// Appends `packet`; false when `out` has failed (the export stops there).
  bool write(const pftrace::TracePacket& packet) {
    const size_t size = packet.ByteSizeLong();
    buffer_ += static_cast<char>(kPacketTag);
    for (uint64_t rest = size;; rest >>= 7) {  // varint
      if (rest < 0x80) {
        buffer_ += static_cast<char>(rest);
        break;
      }
      buffer_ += static_cast<char>((rest & 0x7F) | 0x80);
    }
    packet.AppendToString(&buffer_);
    ++packets_;
    return buffer_.size() < kChunkBytes || flush();
  }
  bool flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    return static_cast<bool>(out_);
  }
  uint64_t packets() const { return packets_; }

  static constexpr unsigned kPacketTag = (1 << 3) | 2;  // field 1, length-delimited

 private:
  static constexpr size_t kChunkBytes = 64 * 1024;
  std::ostream& out_;
  std::string buffer_;
  uint64_t packets_ = 0;
};

/// Reads the packets of one trace file in order. Each packet gets its own CodedInputStream (the
/// cheap, documented way to read many messages from one stream), so no 2 GiB total limit applies.
class PacketReader {
 public:
  enum class Status { Packet, End, Error };

  explicit PacketReader(const std::string& path) : PacketReader(path, 0, 0) {}
  /// Reads `path` from byte `position`, where packet number `index` starts (a position() and
  /// packets() of an earlier reader: how a merge closes an input and goes on with it later).
  PacketReader(const std::string& path, uint64_t position, uint64_t index)
      : index_(index), position_(position) {
    errno = 0;
    file_.open(path, std::ios::binary);
    open_errno_ = errno;
    if (file_ && position != 0) file_.seekg(static_cast<std::streamoff>(position));
    if (file_) raw_ = std::make_unique<google::protobuf::io::IstreamInputStream>(&file_);
  }
  bool opened() const { return static_cast<bool>(raw_); }
  /// Why the file did not open (errno of the open, as libstdc++'s filebuf leaves it; 0 if unknown).
  int open_errno() const { return opened() ? 0 : open_errno_; }

  /// The next packet into `packet`; on Error, error() says what was wrong and where.
  Status next(pftrace::TracePacket& packet) {
    for (;;) {
      google::protobuf::io::CodedInputStream coded(raw_.get());
      const uint32_t tag = coded.ReadTag();
      if (tag == 0) {
        if (file_.bad()) return fail("the file could not be read");
        return coded.ConsumedEntireMessage() ? Status::End : fail("an invalid field tag");
      }
      if (tag != kPacketTag) {
        // Other fields of Trace (none is defined) are skipped, as protobuf would.
        if (!google::protobuf::internal::WireFormatLite::SkipField(&coded, tag))
          return fail("a truncated field");
        position_ += static_cast<uint64_t>(coded.CurrentPosition());
        continue;
      }
      // Read as 64 bits: ReadVarint32 keeps the low 32 bits of a longer varint, so a packet
      // claiming 2^62 bytes read as an empty one and the next bytes as packets; and a length
      // of 2^31 or more must not become a negative limit.
      uint64_t length = 0;
      if (!coded.ReadVarint64(&length)) return fail("a truncated packet length");
      if (length > static_cast<uint64_t>(std::numeric_limits<int>::max()))
        return fail("a packet length of " + std::to_string(length) +
                    " bytes, more than a packet can hold (2 GiB)");
      const auto limit = coded.PushLimit(static_cast<int>(length));
      packet.Clear();
      const bool parsed = packet.MergeFromCodedStream(&coded) && coded.ConsumedEntireMessage() &&
                          coded.BytesUntilLimit() == 0;
      coded.PopLimit(limit);
      if (!parsed) return fail("a packet that is truncated or does not parse as a TracePacket");
      position_ += static_cast<uint64_t>(coded.CurrentPosition());
      ++index_;
      return Status::Packet;
    }
  }
  const std::string& error() const { return error_; }
  /// Bytes of the file consumed by whole packets, and the packets read, so far.
  uint64_t position() const { return position_; }
  uint64_t packets() const { return index_; }

 private:
  static constexpr uint32_t kPacketTag = PacketWriter::kPacketTag;
  Status fail(const std::string& what) {
    error_ = what + " after " + std::to_string(index_) + " packets (at byte " +
             std::to_string(position_) + ")";
    return Status::Error;
  }

  std::ifstream file_;
  int open_errno_ = 0;
  std::unique_ptr<google::protobuf::io::IstreamInputStream> raw_;
  uint64_t index_ = 0;
  uint64_t position_ = 0;  // bytes of the file consumed by whole packets
  std::string error_;
};

}  // namespace accgraph::timing::detail
