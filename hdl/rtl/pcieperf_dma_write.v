// DMA write engine (device -> host): back-to-back posted memory writes of up to MaxPayload bytes on the
// UltraScale+ requester request (RQ) interface, DWORD-aligned mode, payload = pcieperf's LFSR
// pattern at the run's stream offset, so the host verifies what arrives with Pattern::lfsr(seed).
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_dma_write #(
    parameter DATA_WIDTH = 256
) (
    input  wire                     clk,
    input  wire                     rst,
    input  wire                     start,
    input  wire [63:0]              base0,
    input  wire [63:0]              base1,
    input  wire [31:0]              chunk_bytes,
    input  wire [47:0]              total_bytes,
    input  wire [63:0]              pattern_offset,
    input  wire [63:0]              seed,
    input  wire [12:0]              max_payload_bytes,
    output wire                     busy,
    // One payload beat accepted (for stall detection).
    output wire                     data_beat,

    output wire [DATA_WIDTH-1:0]    rq_tdata,
    output wire [DATA_WIDTH/32-1:0] rq_tkeep,
    output wire                     rq_tlast,
    output wire [61:0]              rq_tuser,
    output wire                     rq_tvalid,
    input  wire                     rq_tready
);
`include "pcieperf_functions.vh"

    localparam LANES = DATA_WIDTH / 32;
    localparam [2:0] S_IDLE = 3'd0, S_SEED = 3'd1, S_SEEK = 3'd2, S_PREP = 3'd3, S_SEND = 3'd4;

    reg  [2:0]   state;
    reg  [31:0]  lfsr;         // state before the next pattern word
    reg  [9:0]   seek_words;
    reg  [127:0] descriptor;
    reg  [10:0]  tlp_words;    // payload DWs of the current TLP
    reg  [10:0]  beat;         // beat index within the current TLP

    wire [63:0] addr, offset;
    wire [12:0] len_bytes;
    wire        unused_low_bits = &{1'b0, addr[1:0], len_bytes[1:0]};  // DW-aligned by construction
    wire        walk_done;
    // The next TLP is set up in PREP after the seek, then during each TLP's last beat, so
    // back-to-back TLPs leave no idle cycle between them.
    wire        tlp_end = state == S_SEND && rq_tready && beat_last;
    wire        advance = (state == S_PREP || tlp_end) && !walk_done;

    pcieperf_walker walker (
        .clk(clk), .rst(rst), .start(start && state == S_IDLE),
        .base0(base0), .base1(base1), .chunk_bytes(chunk_bytes), .total_bytes(total_bytes),
        .pattern_offset(pattern_offset), .limit_bytes(max_payload_bytes), .advance(advance),
        .addr(addr), .offset(offset), .len_bytes(len_bytes), .done(walk_done)
    );

    // The next LANES pattern words: chain[32*(i+1) +: 32] is the i-th word from now.
    reg [32*(LANES+1)-1:0] chain;
    integer i;
    always @* begin
        chain[31:0] = lfsr;
        for (i = 0; i < LANES; i = i + 1)
            chain[32*(i+1) +: 32] = xorshift32(chain[32*i +: 32]);
    end

    // Lanes of this beat: DW index d = beat * LANES + lane; d < 4 is the descriptor.
    reg  [DATA_WIDTH-1:0] beat_data;
    reg  [LANES-1:0]      beat_keep;
    reg  [4:0]            payload_lanes;
    reg                   beat_last;
    integer lane;
    reg  [15:0] d;
    always @* begin
        beat_data = {DATA_WIDTH{1'b0}};
        beat_keep = {LANES{1'b0}};
        payload_lanes = 5'd0;
        for (lane = 0; lane < LANES; lane = lane + 1) begin
            d = 16'({5'd0, beat} * LANES + lane);
            if (d < 16'd4) begin
                beat_data[32*lane +: 32] = descriptor[32*d[1:0] +: 32];
                beat_keep[lane] = 1'b1;
            end else if (d < 16'd4 + {5'd0, tlp_words}) begin
                beat_data[32*lane +: 32] = chain[32*(payload_lanes+1) +: 32];
                beat_keep[lane] = 1'b1;
                payload_lanes = payload_lanes + 5'd1;
            end
        end
        beat_last = ({21'd0, beat} + 32'd1) * LANES >= 32'd4 + {21'd0, tlp_words};
    end

    assign rq_tvalid = state == S_SEND;
    assign rq_tdata = beat_data;
    assign rq_tkeep = beat_keep;
    assign rq_tlast = beat_last;
    // first_be = 0xF, last_be = 0xF unless the TLP is one DW.
    assign rq_tuser = {54'd0, (tlp_words > 11'd1) ? 4'hF : 4'h0, 4'hF};
    assign busy = state != S_IDLE;
    assign data_beat = rq_tvalid && rq_tready && payload_lanes != 5'd0;

    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            lfsr <= 32'd0;
            seek_words <= 10'd0;
            descriptor <= 128'd0;
            tlp_words <= 11'd0;
            beat <= 11'd0;
        end else begin
            case (state)
                S_IDLE: if (start) state <= S_SEED;
                S_SEED: begin
                    // Start of the run: the pattern block's seed, then step to the offset's word.
                    lfsr <= block_seed(seed, offset[63:12]);
                    seek_words <= offset[11:2];
                    state <= S_SEEK;
                end
                S_SEEK: begin
                    if (seek_words != 10'd0) begin
                        lfsr <= xorshift32(lfsr);
                        seek_words <= seek_words - 10'd1;
                    end else begin
                        state <= S_PREP;
                    end
                end
                S_PREP: if (walk_done) state <= S_IDLE;
                S_SEND: begin
                    if (rq_tready) begin
                        lfsr <= chain[32*payload_lanes +: 32];
                        beat <= beat + 11'd1;
                        if (beat_last && walk_done) state <= S_IDLE;
                    end
                end
                default: state <= S_IDLE;
            endcase
            if (advance) begin
                // Latch the next TLP: a new pattern block restarts the generator.
                if (offset[11:0] == 12'd0)
                    lfsr <= block_seed(seed, offset[63:12]);
                tlp_words <= len_bytes[12:2];
                // RQ descriptor: address, DW count, type 0001 (memory write), tag 0.
                descriptor <= {32'd0, 16'd0, 1'b0, 4'b0001, len_bytes[12:2], addr[63:2], 2'b00};
                beat <= 11'd0;
                state <= S_SEND;
            end
        end
    end
endmodule

`default_nettype wire
