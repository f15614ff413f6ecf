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
// inversion. 32 bit-serial steps are linear in crc ^ word: each result bit is the parity of the
// bits its mask selects (masks generated from the bit-serial definition; the tests compare the
// result with zlib's CRC32).
function [31:0] crc32_word;
    input [31:0] crc;
    input [31:0] word;
    reg [31:0] x;
    begin
        x = crc ^ word;
        crc32_word[0] = ^(x & 32'h04D101DF);
        crc32_word[1] = ^(x & 32'h09A203BE);
        crc32_word[2] = ^(x & 32'h1344077D);
        crc32_word[3] = ^(x & 32'h26880EFA);
        crc32_word[4] = ^(x & 32'h4D101DF4);
        crc32_word[5] = ^(x & 32'h9A203BE9);
        crc32_word[6] = ^(x & 32'h3091760D);
        crc32_word[7] = ^(x & 32'h6122EC1A);
        crc32_word[8] = ^(x & 32'hC245D835);
        crc32_word[9] = ^(x & 32'h805AB1B5);
        crc32_word[10] = ^(x & 32'h046462B5);
        crc32_word[11] = ^(x & 32'h08C8C56A);
        crc32_word[12] = ^(x & 32'h11918AD4);
        crc32_word[13] = ^(x & 32'h232315A9);
        crc32_word[14] = ^(x & 32'h46462B53);
        crc32_word[15] = ^(x & 32'h8C8C56A6);
        crc32_word[16] = ^(x & 32'h1DC9AC92);
        crc32_word[17] = ^(x & 32'h3B935924);
        crc32_word[18] = ^(x & 32'h7726B249);
        crc32_word[19] = ^(x & 32'hEE4D6493);
        crc32_word[20] = ^(x & 32'hD84BC8F9);
        crc32_word[21] = ^(x & 32'hB446902D);
        crc32_word[22] = ^(x & 32'h6C5C2184);
        crc32_word[23] = ^(x & 32'hD8B84309);
        crc32_word[24] = ^(x & 32'hB5A187CC);
        crc32_word[25] = ^(x & 32'h6F920E46);
        crc32_word[26] = ^(x & 32'hDF241C8C);
        crc32_word[27] = ^(x & 32'hBA9938C7);
        crc32_word[28] = ^(x & 32'h71E37051);
        crc32_word[29] = ^(x & 32'hE3C6E0A3);
        crc32_word[30] = ^(x & 32'hC35CC098);
        crc32_word[31] = ^(x & 32'h826880EF);
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
