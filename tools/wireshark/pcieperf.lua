-- Wireshark dissector for pcieperf's simulated-link traces (pcieperf trace --format pcapng).
-- Link type LINKTYPE_USER0 (147, WTAP_ENCAP_USER0). Record layout: docs/trace.md.
--   tshark -X lua_script:tools/wireshark/pcieperf.lua -r trace.pcapng -V
-- or copy this file to ~/.local/lib/wireshark/plugins/.

local p = Proto("pcieperf", "PCIe link (pcieperf simulated trace)")

local directions = { [0] = "downstream", [1] = "upstream", [2] = "both directions" }
local encodings = { [0] = "8b/10b", [1] = "128b/130b" }
local kinds = { [1] = "TLP", [2] = "DLLP", [3] = "SKP ordered set", [5] = "time left out (fast-forward)" }
local tlp_types = { [0x00] = "MRd", [0x20] = "MRd", [0x40] = "MWr", [0x60] = "MWr", [0x4A] = "CplD", [0x0A] = "Cpl" }
local dllp_types = { [0x00] = "Ack", [0x10] = "Nak", [0x80] = "UpdateFC-P", [0x90] = "UpdateFC-NP", [0xA0] = "UpdateFC-Cpl",
  [0x40] = "InitFC1-P", [0x50] = "InitFC1-NP", [0x60] = "InitFC1-Cpl", [0xC0] = "InitFC2-P", [0xD0] = "InitFC2-NP", [0xE0] = "InitFC2-Cpl" }
local cpl_status = { [0] = "Successful", [1] = "Unsupported Request", [2] = "Config Request Retry", [4] = "Completer Abort" }

local f = p.fields
f.version = ProtoField.uint8("pcieperf.version", "Record version")
f.dir = ProtoField.uint8("pcieperf.dir", "Direction", base.DEC, directions)
f.gen = ProtoField.uint8("pcieperf.gen", "Generation")
f.width = ProtoField.uint8("pcieperf.width", "Width (lanes)")
f.encoding = ProtoField.uint8("pcieperf.encoding", "Encoding", base.DEC, encodings)
f.kind = ProtoField.uint8("pcieperf.kind", "Packet kind", base.DEC, kinds)
f.start_ps = ProtoField.uint64("pcieperf.start_ps", "Start (ps)")
f.duration_ps = ProtoField.uint32("pcieperf.duration_ps", "Duration on the lanes (ps)")
f.framing = ProtoField.bytes("pcieperf.framing", "Framing")
f.seq = ProtoField.uint16("pcieperf.seq", "Sequence number")
f.stp_len = ProtoField.uint16("pcieperf.stp.length", "STP token TLP length (DW)")
f.stp_fcrc = ProtoField.uint8("pcieperf.stp.fcrc", "STP token frame CRC", base.HEX)
f.stp_parity = ProtoField.uint8("pcieperf.stp.parity", "STP token frame parity")
f.lcrc = ProtoField.uint32("pcieperf.lcrc", "LCRC", base.HEX)
f.ecrc = ProtoField.uint32("pcieperf.ecrc", "ECRC", base.HEX)
f.name = ProtoField.string("pcieperf.name", "Packet")
f.fmt_type = ProtoField.uint8("pcieperf.tlp.fmt_type", "Fmt/Type", base.HEX)
f.td = ProtoField.uint8("pcieperf.tlp.td", "TD (digest)")
f.ep = ProtoField.uint8("pcieperf.tlp.ep", "EP (poisoned)")
f.len_dw = ProtoField.uint16("pcieperf.tlp.length", "Length (DW)")
f.req_id = ProtoField.uint16("pcieperf.tlp.requester", "Requester ID", base.HEX)
f.tag = ProtoField.uint16("pcieperf.tlp.tag", "Tag")
f.first_be = ProtoField.uint8("pcieperf.tlp.first_be", "First DW BE", base.HEX)
f.last_be = ProtoField.uint8("pcieperf.tlp.last_be", "Last DW BE", base.HEX)
f.addr = ProtoField.uint64("pcieperf.tlp.addr", "Address", base.HEX)
f.bytes = ProtoField.uint16("pcieperf.tlp.bytes", "Payload bytes (byte-exact)")
f.cpl_id = ProtoField.uint16("pcieperf.cpl.completer", "Completer ID", base.HEX)
f.cpl_status = ProtoField.uint8("pcieperf.cpl.status", "Completion status", base.DEC, cpl_status)
f.cpl_bcm = ProtoField.uint8("pcieperf.cpl.bcm", "BCM")
f.cpl_byte_count = ProtoField.uint16("pcieperf.cpl.byte_count", "Byte Count")
f.cpl_lower = ProtoField.uint8("pcieperf.cpl.lower_addr", "Lower Address", base.HEX)
f.data = ProtoField.bytes("pcieperf.tlp.data", "Data")
f.dllp_type = ProtoField.uint8("pcieperf.dllp.type", "DLLP type", base.HEX, nil, 0xF8)
f.ack_seq = ProtoField.uint16("pcieperf.dllp.seq", "Ack/Nak sequence number")
f.fc_vc = ProtoField.uint8("pcieperf.dllp.vc", "VC")
f.hdr_fc = ProtoField.uint16("pcieperf.dllp.hdr_fc", "HdrFC")
f.data_fc = ProtoField.uint16("pcieperf.dllp.data_fc", "DataFC")
f.dllp_crc = ProtoField.uint16("pcieperf.dllp.crc", "DLLP CRC16", base.HEX)
-- A gap the steady-state fast-forward left out (kind 5).
f.gap_duration_ps = ProtoField.uint64("pcieperf.gap.duration_ps", "Time left out (ps)")
f.gap_periods = ProtoField.uint64("pcieperf.gap.periods", "Periods left out")
f.gap_period_ps = ProtoField.uint64("pcieperf.gap.period_ps", "Period (ps)")
f.gap_tlps_down = ProtoField.uint64("pcieperf.gap.down.tlps", "Downstream TLPs left out")
f.gap_bytes_down = ProtoField.uint64("pcieperf.gap.down.bytes", "Downstream payload bytes left out")
f.gap_acks_down = ProtoField.uint64("pcieperf.gap.down.acks", "Downstream Acks left out")
f.gap_fcs_down = ProtoField.uint64("pcieperf.gap.down.update_fcs", "Downstream UpdateFCs left out")
f.gap_skps_down = ProtoField.uint64("pcieperf.gap.down.skps", "Downstream SKP ordered sets left out")
f.gap_tlps_up = ProtoField.uint64("pcieperf.gap.up.tlps", "Upstream TLPs left out")
f.gap_bytes_up = ProtoField.uint64("pcieperf.gap.up.bytes", "Upstream payload bytes left out")
f.gap_acks_up = ProtoField.uint64("pcieperf.gap.up.acks", "Upstream Acks left out")
f.gap_fcs_up = ProtoField.uint64("pcieperf.gap.up.update_fcs", "Upstream UpdateFCs left out")
f.gap_skps_up = ProtoField.uint64("pcieperf.gap.up.skps", "Upstream SKP ordered sets left out")

local HEADER = 20

-- Wireshark 4.0 embeds Lua 5.2: bit operations through bit32 (or LuaBitOp's bit).
local bitops = bit32 or bit
local band, bor, shl, shr = bitops.band, bitops.bor, bitops.lshift, bitops.rshift
local function bit1(x, n) return band(shr(x, n), 1) end

-- A TLP's header, data and ECRC: tvb range `r` (no framing, no LCRC).
local function dissect_tlp_body(r, tree, pinfo)
  local fmt_type = r(0, 1):uint()
  local name = tlp_types[fmt_type] or string.format("TLP 0x%02x", fmt_type)
  tree:add(f.name, name)
  tree:add(f.fmt_type, r(0, 1))
  local b1, b2 = r(1, 1):uint(), r(2, 1):uint()
  local td = bit1(b2, 7)
  tree:add(f.td, td)
  tree:add(f.ep, bit1(b2, 6))
  local dws = bor(shl(band(b2, 3), 8), r(3, 1):uint())
  if dws == 0 then dws = 1024 end
  tree:add(f.len_dw, r(2, 2), dws)
  local tag_high = bor(shl(bit1(b1, 7), 9), shl(bit1(b1, 3), 8))
  local with_data = band(fmt_type, 0x40) ~= 0
  local header_bytes = (band(fmt_type, 0x20) ~= 0) and 16 or 12
  local info
  if name == "CplD" or name == "Cpl" then
    tree:add(f.cpl_id, r(4, 2))
    local b6 = r(6, 1):uint()
    tree:add(f.cpl_status, shr(b6, 5))
    tree:add(f.cpl_bcm, bit1(b6, 4))
    local byte_count = bor(shl(band(b6, 0x0F), 8), r(7, 1):uint())
    if byte_count == 0 then byte_count = 4096 end
    tree:add(f.cpl_byte_count, r(6, 2), byte_count)
    tree:add(f.req_id, r(8, 2))
    local tag = bor(tag_high, r(10, 1):uint())
    tree:add(f.tag, r(10, 1), tag)
    local lower = band(r(11, 1):uint(), 0x7F)
    tree:add(f.cpl_lower, r(11, 1), lower)
    local bytes = math.min(byte_count, dws * 4 - band(lower, 3))
    tree:add(f.bytes, bytes)
    info = string.format("%s tag %d lower 0x%02x %d B", name, tag, lower, bytes)
  else
    tree:add(f.req_id, r(4, 2))
    local tag = bor(tag_high, r(6, 1):uint())
    tree:add(f.tag, r(6, 1), tag)
    local be = r(7, 1):uint()
    local first, last = band(be, 0x0F), shr(be, 4)
    tree:add(f.first_be, first)
    tree:add(f.last_be, last)
    local addr
    if header_bytes == 16 then
      addr = UInt64(band(r(12, 4):uint(), 0xFFFFFFFC), r(8, 4):uint())
    else
      addr = UInt64(band(r(8, 4):uint(), 0xFFFFFFFC), 0)
    end
    -- The first enabled byte, and the byte-exact length the byte enables give.
    local lead = 0
    while lead < 4 and bit1(first, lead) == 0 do lead = lead + 1 end
    local bytes
    if dws == 1 then
      local top = 3
      while top > 0 and bit1(first, top) == 0 do top = top - 1 end
      bytes = top - lead + 1
    else
      local trail = 0
      while trail < 4 and bit1(last, 3 - trail) == 0 do trail = trail + 1 end
      bytes = dws * 4 - lead - trail
    end
    addr = addr + lead
    tree:add(f.addr, r(8, header_bytes - 8), addr)
    tree:add(f.bytes, bytes)
    info = string.format("%s tag %d addr 0x%s %d B", name, tag, addr:tohex():gsub("^0+(%x)", "%1"), bytes)
  end
  local data_bytes = with_data and dws * 4 or 0
  if data_bytes > 0 then tree:add(f.data, r(header_bytes, data_bytes)) end
  if td == 1 then tree:add(f.ecrc, r(header_bytes + data_bytes, 4)) end
  return info
end

local function dissect_dllp(r, tree)
  local t = r(0, 1):uint()
  local kind = band(t, 0xF0)
  local name = dllp_types[kind] or string.format("DLLP 0x%02x", t)
  tree:add(f.name, name)
  tree:add(f.dllp_type, r(0, 1))
  local info = name
  if kind == 0x00 or kind == 0x10 then
    local seq = band(r(2, 2):uint(), 0x0FFF)
    tree:add(f.ack_seq, r(2, 2), seq)
    info = string.format("%s seq %d", name, seq)
  elseif kind >= 0x40 then
    tree:add(f.fc_vc, band(t, 7))
    local b1, b2, b3 = r(1, 1):uint(), r(2, 1):uint(), r(3, 1):uint()
    local hdr = bor(shl(band(b1, 0x3F), 2), shr(b2, 6))
    local data = bor(shl(band(b2, 0x0F), 8), b3)
    tree:add(f.hdr_fc, r(1, 2), hdr)
    tree:add(f.data_fc, r(2, 2), data)
    info = string.format("%s HdrFC %d DataFC %d", name, hdr, data)
  end
  tree:add(f.dllp_crc, r(4, 2))
  return info
end

function p.dissector(tvb, pinfo, root)
  if tvb:len() < HEADER then return 0 end
  pinfo.cols.protocol = "PCIe"
  local tree = root:add(p, tvb())
  local hlen = tvb(1, 1):uint()
  tree:add(f.version, tvb(0, 1))
  tree:add(f.dir, tvb(2, 1))
  tree:add(f.gen, tvb(3, 1))
  tree:add(f.width, tvb(4, 1))
  tree:add(f.encoding, tvb(5, 1))
  tree:add(f.kind, tvb(6, 1))
  tree:add(f.start_ps, tvb(8, 8))
  tree:add(f.duration_ps, tvb(16, 4))
  local dir = tvb(2, 1):uint()
  local encoding = tvb(5, 1):uint()
  local kind = tvb(6, 1):uint()
  local w = tvb(hlen)
  local n = w:len()
  local info
  if kind == 1 then
    local body
    if encoding == 0 then
      tree:add(f.framing, w(0, 1)) -- STP
      tree:add(f.seq, w(1, 2), band(w(1, 2):uint(), 0x0FFF))
      body = w(3, n - 3 - 5)
      tree:add(f.lcrc, w(n - 5, 4), w(n - 5, 4):le_uint())
      tree:add(f.framing, w(n - 1, 1)) -- END
    else
      local b0, b1, b2 = w(0, 1):uint(), w(1, 1):uint(), w(2, 1):uint()
      tree:add(f.framing, w(0, 4)) -- STP token
      tree:add(f.stp_len, w(0, 2), bor(shr(b0, 4), shl(band(b1, 0x7F), 4)))
      tree:add(f.stp_parity, shr(b1, 7))
      tree:add(f.stp_fcrc, shr(b2, 4))
      tree:add(f.seq, w(2, 2), band(w(2, 2):uint(), 0x0FFF))
      body = w(4, n - 4 - 4)
      tree:add(f.lcrc, w(n - 4, 4), w(n - 4, 4):le_uint())
    end
    info = dissect_tlp_body(body, tree, pinfo)
  elseif kind == 2 then
    local start = (encoding == 0) and 1 or 2
    tree:add(f.framing, w(0, start))
    info = dissect_dllp(w(start, 6), tree)
    if encoding == 0 then tree:add(f.framing, w(7, 1)) end
  elseif kind == 5 then
    local gap = tree:add(p, w, "Fast-forward: time left out (the record has nothing here)")
    gap:add(f.gap_duration_ps, w(0, 8))
    gap:add(f.gap_periods, w(8, 8))
    gap:add(f.gap_period_ps, w(16, 8))
    local fields = { { f.gap_tlps_down, f.gap_bytes_down, f.gap_acks_down, f.gap_fcs_down, f.gap_skps_down },
                     { f.gap_tlps_up, f.gap_bytes_up, f.gap_acks_up, f.gap_fcs_up, f.gap_skps_up } }
    for d = 1, 2 do
      for i = 1, 5 do
        gap:add(fields[d][i], w(24 + (d - 1) * 40 + (i - 1) * 8, 8))
      end
    end
    local function u64(at) return w(at, 8):uint64() end
    tree:add(f.name, "fast-forward")
    info = string.format("fast-forward: %s periods of %s ps left out (%s ps): %s TLPs, %s B downstream; %s TLPs, %s B upstream",
      tostring(u64(8)), tostring(u64(16)), tostring(u64(0)), tostring(u64(24)), tostring(u64(32)), tostring(u64(64)), tostring(u64(72)))
  else
    tree:add(f.name, "SKP")
    tree:add(f.framing, w)
    info = "SKP ordered set"
  end
  pinfo.cols.info = string.format("%s %s", directions[dir] or "?", info)
  return tvb:len()
end

DissectorTable.get("wtap_encap"):add(wtap.USER0, p)
