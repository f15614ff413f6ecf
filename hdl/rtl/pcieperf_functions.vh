// Shared functions of the pcieperf core: the host's test pattern and CRC32.
// Included inside modules (Verilog-2001 functions are module-scoped).
//
// The pattern is pcieperf's `Pattern::lfsr(seed)` (src/engine/pattern.rs): a xorshift32
// generator restarted at every 4 KiB of the stream from splitmix64(seed ^ block * golden).
// Each 32-bit word is the state after one step, stored little-endian.

function [31:0] xorshift32;
    input [31:0] s;
    reg [31:0] t;
    begin
        t = s ^ (s << 13);
        t = t ^ (t >> 17);
        xorshift32 = t ^ (t << 5);
    end
endfunction

// State at the start of pattern block `block` (block = stream byte offset / 4096).
function [31:0] block_seed;
    input [63:0] run_seed;
    input [51:0] block;
    reg [63:0] z;
    begin
        z = run_seed ^ ({12'd0, block} * 64'h9E3779B97F4A7C15);
        z = (z ^ (z >> 30)) * 64'hBF58476D1CE4E5B9;
        z = (z ^ (z >> 27)) * 64'h94D049BB133111EB;
        z = z ^ (z >> 31);
        block_seed = (z[31:0] == 32'd0) ? 32'h12345678 : z[31:0];
    end
endfunction

// One 32-bit little-endian word folded into a reflected CRC-32 (Ethernet polynomial
// 0x04C11DB7, reflected 0xEDB88320); the register holds the running value before the final
// inversion.
function [31:0] crc32_word;
    input [31:0] crc;
    input [31:0] word;
    integer b;
    reg [31:0] c;
    begin
        c = crc ^ word;
        for (b = 0; b < 32; b = b + 1)
            c = c[0] ? ((c >> 1) ^ 32'hEDB88320) : (c >> 1);
        crc32_word = c;
    end
endfunction

// Bits that differ between two words.
function [5:0] popcount32;
    input [31:0] x;
    integer b;
    reg [5:0] n;
    begin
        n = 6'd0;
        for (b = 0; b < 32; b = b + 1)
            n = n + {5'd0, x[b]};
        popcount32 = n;
    end
endfunction

// Bytes of the next TLP: the smallest of the size limit, what is left, the distance to the
// next 4 KiB address boundary, to the next pattern block, and to the end of the current buffer.
function [12:0] tlp_bytes;
    input [12:0] limit;
    input [47:0] remaining_bytes;
    input [11:0] addr_low;
    input [11:0] offset_low;
    input [31:0] chunk_left_bytes;
    reg [47:0] n;
    begin
        n = {35'd0, limit};
        if (remaining_bytes < n) n = remaining_bytes;
        if ({35'd0, 13'h1000 - {1'b0, addr_low}} < n) n = {35'd0, 13'h1000 - {1'b0, addr_low}};
        if ({35'd0, 13'h1000 - {1'b0, offset_low}} < n) n = {35'd0, 13'h1000 - {1'b0, offset_low}};
        if ({16'd0, chunk_left_bytes} < n) n = {16'd0, chunk_left_bytes};
        tlp_bytes = n[12:0];
    end
endfunction
