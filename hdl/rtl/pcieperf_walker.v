// Walks a DMA run through host memory, one TLP at a time.
//
// A run moves `total_bytes` starting at pattern offset `pattern_offset`. Host addresses come
// from one buffer (`chunk_bytes` = 0: base0, base0 + 1, ...) or alternate between two buffers of
// `chunk_bytes` each (document 001's two 8 KiB buffers: base0, base1, base0, ...). Every TLP
// ends at the smallest of: the engine's size limit (MPS or MRRS), the end of the run, the next
// 4 KiB address boundary (PCIe forbids crossing it), the next 4 KiB pattern block (so a TLP's
// pattern words come from one LFSR sequence) and the end of the current buffer.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_walker (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [63:0] base0,
    input  wire [63:0] base1,
    input  wire [31:0] chunk_bytes,
    input  wire [47:0] total_bytes,
    input  wire [63:0] pattern_offset,
    input  wire [12:0] limit_bytes,
    input  wire        advance,
    output reg  [63:0] addr,
    output reg  [63:0] offset,
    output wire [12:0] len_bytes,
    output wire        done
);
`include "pcieperf_functions.vh"

    reg [47:0] remaining;
    reg [31:0] chunk_left;
    reg        use_base1;
    reg [31:0] chunk;

    assign len_bytes = tlp_bytes(limit_bytes, remaining, addr[11:0], offset[11:0], chunk_left);
    assign done = remaining == 48'd0;

    always @(posedge clk) begin
        if (rst) begin
            addr <= 64'd0;
            offset <= 64'd0;
            remaining <= 48'd0;
            chunk_left <= 32'd0;
            use_base1 <= 1'b0;
            chunk <= 32'd0;
        end else if (start) begin
            addr <= base0;
            offset <= pattern_offset;
            remaining <= total_bytes;
            chunk <= chunk_bytes;
            chunk_left <= (chunk_bytes == 32'd0) ? 32'hFFFF_FFFF : chunk_bytes;
            use_base1 <= 1'b0;
        end else if (advance) begin
            offset <= offset + {51'd0, len_bytes};
            remaining <= remaining - {35'd0, len_bytes};
            if (chunk != 32'd0 && chunk_left == {19'd0, len_bytes}) begin
                // End of this buffer: continue at the start of the other one.
                addr <= use_base1 ? base0 : base1;
                use_base1 <= ~use_base1;
                chunk_left <= chunk;
            end else begin
                addr <= addr + {51'd0, len_bytes};
                chunk_left <= chunk_left - {19'd0, len_bytes};
            end
        end
    end
endmodule

`default_nettype wire
