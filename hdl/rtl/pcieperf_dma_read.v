// DMA read engine (host -> device): memory reads of up to MaxReadRequest bytes on the
// UltraScale+ RQ interface with up to `tags` requests outstanding, completions from the RC
// interface (DWORD-aligned mode) reassembled per tag in a reorder buffer, so RCB splits and
// completions of different tags in any order land where they belong. Requests are drained in
// issue order: each DW is compared with pcieperf's LFSR pattern (bit errors, first offset) and
// folded into a CRC32 (Ethernet) the host compares with the CRC of the data it provided.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_dma_read #(
    parameter DATA_WIDTH = 256,
    // Tags (and reorder-buffer slots of 4 KiB); the hard block's non-extended tags allow 32.
    parameter MAX_TAGS = 32
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
    input  wire [12:0]              max_read_request_bytes,
    input  wire [5:0]               tags,              // requests in flight at most (1..MAX_TAGS)
    input  wire                     check_enable,      // compare with the pattern
    output wire                     busy,
    output wire                     data_beat,         // one completion data beat accepted
    output reg  [31:0]              crc32,             // CRC32 of the data received so far
    output reg  [31:0]              bit_errors,
    output reg  [63:0]              first_error_offset, // pattern offset of the first wrong byte
    output reg                      error_found,
    output reg  [31:0]              completion_errors, // completions with a status other than SC
    output reg  [5:0]               max_outstanding,   // most requests in flight at once

    output wire [DATA_WIDTH-1:0]    rq_tdata,
    output wire [DATA_WIDTH/32-1:0] rq_tkeep,
    output wire                     rq_tlast,
    output wire [61:0]              rq_tuser,
    output wire                     rq_tvalid,
    input  wire                     rq_tready,

    input  wire [DATA_WIDTH-1:0]    rc_tdata,
    input  wire [DATA_WIDTH/32-1:0] rc_tkeep,
    input  wire                     rc_tlast,
    input  wire [74:0]              rc_tuser,
    input  wire                     rc_tvalid,
    output wire                     rc_tready
);
`include "pcieperf_functions.vh"

    localparam LANES = DATA_WIDTH / 32;
    localparam [4:0] LANES5 = 5'(LANES);
    localparam SLOT_WORDS = 1024;                 // 4 KiB: the largest MaxReadRequest
    localparam TAG_BITS = $clog2(MAX_TAGS);
    localparam ROB_BITS = TAG_BITS + 10;
    localparam LANE_BITS = $clog2(LANES);
    localparam BANK_WORDS = MAX_TAGS * SLOT_WORDS / LANES;
    localparam [2:0] S_IDLE = 3'd0, S_SEED = 3'd1, S_SEEK = 3'd2, S_RUN = 3'd3;

    // ---- run state -------------------------------------------------------------------------
    reg  [2:0]  state;
    reg  [9:0]  seek_words;
    reg  [31:0] lfsr;                 // checker: state before the next expected word
    reg  [31:0] crc_state;            // CRC register before the final inversion
    reg  [6:0]  outstanding;          // requests issued and not yet drained
    reg  [TAG_BITS-1:0] issue_tag;    // next tag to issue (ring order)
    reg  [TAG_BITS-1:0] head_tag;     // oldest request (next to drain)

    // ---- per-tag table: what each request asked for and how much has arrived --------------
    reg [10:0] slot_words    [0:MAX_TAGS-1];
    reg [10:0] slot_received [0:MAX_TAGS-1];
    reg [63:0] slot_offset   [0:MAX_TAGS-1];
    // The reorder buffer (rob) is LANES banks of one write and one registered read port each,
    // so that it maps to block RAM: word i lives in bank i mod LANES. A beat's lanes carry
    // consecutive words, so each bank takes at most one of them (rotated into place).

    // ---- request side: one MRd descriptor (4 DWs) per request -------------------------------
    wire [63:0] addr, offset;
    wire [12:0] len_bytes;
    wire        walk_done;
    reg  [127:0] descriptor;
    // DW-aligned by construction; RC tuser (byte enables, SOP/EOP flags) is not needed in
    // DWORD-aligned mode without straddling.
    wire        unused = &{1'b0, addr[1:0], len_bytes[1:0], rc_tuser, rc_byte_count[1:0]};
    reg  [10:0]  request_words;
    reg          sending;
    reg  [1:0]   send_beat;
    wire         can_issue = state == S_RUN && !sending && !walk_done
                             && outstanding < {1'b0, tags} && tags != 6'd0;

    pcieperf_walker walker (
        .clk(clk), .rst(rst), .start(start && state == S_IDLE),
        .base0(base0), .base1(base1), .chunk_bytes(chunk_bytes), .total_bytes(total_bytes),
        .pattern_offset(pattern_offset), .limit_bytes(max_read_request_bytes), .advance(can_issue),
        .addr(addr), .offset(offset), .len_bytes(len_bytes), .done(walk_done)
    );

    localparam DESC_BEATS = (4 + LANES - 1) / LANES;
    reg [DATA_WIDTH-1:0] rq_data;
    reg [LANES-1:0]      rq_keep;
    integer l;
    always @* begin
        rq_data = {DATA_WIDTH{1'b0}};
        rq_keep = {LANES{1'b0}};
        for (l = 0; l < LANES; l = l + 1)
            if ({30'd0, send_beat} * LANES + l < 4) begin
                rq_data[32*l +: 32] = descriptor[32*(send_beat * LANES + l) +: 32];
                rq_keep[l] = 1'b1;
            end
    end
    assign rq_tvalid = sending;
    assign rq_tdata = rq_data;
    assign rq_tkeep = rq_keep;
    assign rq_tlast = {30'd0, send_beat} == DESC_BEATS - 1;
    assign rq_tuser = {54'd0, (request_words > 11'd1) ? 4'hF : 4'h0, 4'hF};

    // ---- completion side: the RC descriptor is DW0..2, data from DW3 -----------------------
    reg  [10:0] rc_beat;
    reg  [95:0] rc_desc_reg;          // descriptor DWs seen in earlier beats of this TLP
    reg  [95:0] rc_desc;              // ... merged with this beat's
    reg  [4:0]  rc_data_lanes;
    integer k;
    reg  [15:0] rd;
    always @* begin
        rc_desc = rc_desc_reg;
        rc_data_lanes = 5'd0;
        for (k = 0; k < LANES; k = k + 1) begin
            rd = 16'({5'd0, rc_beat} * LANES + k);
            if (rd < 16'd3)
                rc_desc[32*rd[1:0] +: 32] = rc_tdata[32*k +: 32];
            else if (rc_tkeep[k])
                rc_data_lanes = rc_data_lanes + 5'd1;
        end
    end
    wire [TAG_BITS-1:0] rc_tag = rc_desc[64 +: TAG_BITS];
    wire [12:0] rc_byte_count = rc_desc[28:16];
    wire [2:0]  rc_status = rc_desc[45:43];
    wire        rc_poisoned = rc_desc[46];
    wire [3:0]  rc_error_code = rc_desc[15:12];
    wire        rc_failed = rc_status != 3'd0 || rc_poisoned || rc_error_code != 4'd0;
    // Word index within the request of this completion's first data DW.
    wire [10:0] rc_first_word = slot_words[rc_tag] - rc_byte_count[12:2];
    wire        rc_accept = rc_tvalid;   // the reorder buffer has room for every tag in flight
    assign rc_tready = 1'b1;
    assign data_beat = rc_accept && rc_data_lanes != 5'd0;

    // ---- drain side: the oldest request, once complete, LANES words per cycle ---------------
    // Stage 1 reads the words from the reorder buffer (a registered RAM read); stage 2 checks
    // them against the pattern and folds them into the CRC.
    reg  [10:0] drain_word;
    wire        head_ready = state == S_RUN && outstanding != 7'd0
                             && slot_received[head_tag] == slot_words[head_tag];
    wire [10:0] drain_left = slot_words[head_tag] - drain_word;
    wire [4:0]  drain_lanes = (drain_left < {6'd0, LANES5}) ? drain_left[4:0] : LANES5;
    wire        drain_last = head_ready && drain_left <= {6'd0, LANES5};

    reg                   check_valid;       // stage 2 holds words
    reg  [DATA_WIDTH-1:0] check_words;       // from the rob banks, in lane order
    reg  [4:0]            check_lanes;
    reg  [63:0]           check_offset;      // pattern offset of the first word
    reg                   check_reseed;      // first words of a pattern block

    wire [31:0] check_lfsr = check_reseed ? block_seed(seed, check_offset[63:12]) : lfsr;
    reg  [32*(LANES+1)-1:0] chain;
    integer c;
    always @* begin
        chain[31:0] = check_lfsr;
        for (c = 0; c < LANES; c = c + 1)
            chain[32*(c+1) +: 32] = xorshift32(chain[32*c +: 32]);
    end

    assign busy = state != S_IDLE;

    // Where each lane of a completion beat goes in the reorder buffer.
    reg [LANES-1:0]          rc_lane_write;
    reg [ROB_BITS*LANES-1:0] rc_lane_index;
    integer w;
    reg [15:0] lane_dw;
    always @* begin
        for (w = 0; w < LANES; w = w + 1) begin
            lane_dw = 16'({5'd0, rc_beat} * LANES + w);
            rc_lane_write[w] = rc_accept && lane_dw >= 16'd3 && rc_tkeep[w];
            rc_lane_index[ROB_BITS*w +: ROB_BITS] = ROB_BITS'({rc_tag, 10'd0} + {5'd0, rc_first_word} + lane_dw - 16'd3);
        end
    end

    // Stage 1 reads words read_base .. read_base + LANES - 1 of the rob.
    wire [ROB_BITS-1:0] read_base = ROB_BITS'({head_tag, 10'd0} + {5'd0, drain_word});
    reg  [LANE_BITS-1:0] read_rotation;    // read_base mod LANES of the words stage 2 holds
    wire [32*LANES-1:0]  bank_q;
    genvar g;
    generate
        for (g = 0; g < LANES; g = g + 1) begin : rob_bank
            reg [31:0] words [0:BANK_WORDS-1];
            reg [31:0] q;
            // The lane whose word falls in this bank: lane indices are consecutive.
            wire [LANE_BITS-1:0] write_lane = LANE_BITS'(g) - rc_lane_index[LANE_BITS-1:0];
            wire [ROB_BITS-1:0]  write_index = rc_lane_index[ROB_BITS*write_lane +: ROB_BITS];
            wire [ROB_BITS-1:0]  read_index = read_base + {{(ROB_BITS-LANE_BITS){1'b0}}, LANE_BITS'(g) - read_base[LANE_BITS-1:0]};
            // Bank g holds words whose low bits are g: those bits are not part of the address.
            wire                 unused_bank_bits = &{1'b0, write_index[LANE_BITS-1:0], read_index[LANE_BITS-1:0]};
            always @(posedge clk) begin
                if (rc_lane_write[write_lane]) words[write_index[ROB_BITS-1:LANE_BITS]] <= rc_tdata[32*write_lane +: 32];
                if (head_ready) q <= words[read_index[ROB_BITS-1:LANE_BITS]];
            end
            assign bank_q[32*g +: 32] = q;
        end
    endgenerate
    // Lane j of stage 2 is word read_base + j: bank (read_base + j) mod LANES.
    integer r;
    reg [LANE_BITS-1:0] bank_of_lane;
    always @* begin
        for (r = 0; r < LANES; r = r + 1) begin
            bank_of_lane = read_rotation + LANE_BITS'(r);
            check_words[32*r +: 32] = bank_q[32*bank_of_lane +: 32];
        end
    end

    // Stage 2: CRC, bit errors against the pattern, first error offset.
    reg [31:0] crc_next, errors_next, word, diff;
    reg [63:0] first_error_next;
    reg        found_next;
    reg [1:0]  first_byte;
    integer b;
    always @* begin
        crc_next = crc_state;
        errors_next = bit_errors;
        found_next = error_found;
        first_error_next = first_error_offset;
        for (b = 0; b < LANES; b = b + 1) begin
            word = check_words[32*b +: 32];
            diff = word ^ chain[32*(b+1) +: 32];
            first_byte = diff[7:0] != 8'd0 ? 2'd0 : diff[15:8] != 8'd0 ? 2'd1 : diff[23:16] != 8'd0 ? 2'd2 : 2'd3;
            if (5'(b) < check_lanes) begin
                crc_next = crc32_word(crc_next, word);
                if (check_enable && diff != 32'd0) begin
                    errors_next = errors_next + {26'd0, popcount32(diff)};
                    if (!found_next) begin
                        first_error_next = check_offset + {54'd0, 8'(b), 2'b00} + {62'd0, first_byte};
                        found_next = 1'b1;
                    end
                end
            end
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            seek_words <= 10'd0;
            lfsr <= 32'd0;
            crc_state <= 32'hFFFF_FFFF;
            crc32 <= 32'd0;
            outstanding <= 7'd0;
            issue_tag <= {TAG_BITS{1'b0}};
            head_tag <= {TAG_BITS{1'b0}};
            sending <= 1'b0;
            send_beat <= 2'd0;
            descriptor <= 128'd0;
            request_words <= 11'd0;
            rc_beat <= 11'd0;
            rc_desc_reg <= 96'd0;
            drain_word <= 11'd0;
            check_valid <= 1'b0;
            read_rotation <= {LANE_BITS{1'b0}};
            check_lanes <= 5'd0;
            check_offset <= 64'd0;
            check_reseed <= 1'b0;
            bit_errors <= 32'd0;
            first_error_offset <= 64'd0;
            error_found <= 1'b0;
            completion_errors <= 32'd0;
            max_outstanding <= 6'd0;
        end else begin
            case (state)
                S_IDLE: if (start) begin
                    state <= S_SEED;
                    crc_state <= 32'hFFFF_FFFF;
                    crc32 <= 32'd0;
                    bit_errors <= 32'd0;
                    error_found <= 1'b0;
                    first_error_offset <= 64'd0;
                    completion_errors <= 32'd0;
                    max_outstanding <= 6'd0;
                    drain_word <= 11'd0;
                end
                S_SEED: begin
                    lfsr <= block_seed(seed, offset[63:12]);
                    seek_words <= offset[11:2];
                    state <= S_SEEK;
                end
                S_SEEK: begin
                    if (seek_words != 10'd0) begin
                        lfsr <= xorshift32(lfsr);
                        seek_words <= seek_words - 10'd1;
                    end else begin
                        state <= S_RUN;
                    end
                end
                S_RUN: if (walk_done && !sending && outstanding == 7'd0 && !check_valid) state <= S_IDLE;
                default: state <= S_IDLE;
            endcase

            // Issue: latch the next request's descriptor and record it in the tag's slot.
            if (can_issue) begin
                // RQ descriptor: address, DW count, type 0000 (memory read), tag.
                descriptor <= {24'd0, {(8-TAG_BITS){1'b0}}, issue_tag, 16'd0, 1'b0, 4'b0000,
                               len_bytes[12:2], addr[63:2], 2'b00};
                request_words <= len_bytes[12:2];
                slot_words[issue_tag] <= len_bytes[12:2];
                slot_received[issue_tag] <= 11'd0;
                slot_offset[issue_tag] <= offset;
                issue_tag <= issue_tag + 1'b1;   // MAX_TAGS is a power of two: wraps
                sending <= 1'b1;
                send_beat <= 2'd0;
            end else if (sending && rq_tready) begin
                send_beat <= send_beat + 2'd1;
                if (rq_tlast) sending <= 1'b0;
            end

            // Completions: store data words at their place in the tag's slot.
            if (rc_accept) begin
                rc_desc_reg <= rc_desc;
                rc_beat <= rc_tlast ? 11'd0 : rc_beat + 11'd1;
                if (rc_failed && rc_tlast) begin
                    // No (usable) data will come for this request: release it; its words are
                    // checked as they stand, so the failure also shows as bit errors.
                    completion_errors <= completion_errors + 32'd1;
                    slot_received[rc_tag] <= slot_words[rc_tag];
                end else begin
                    slot_received[rc_tag] <= slot_received[rc_tag] + {6'd0, rc_data_lanes};
                end
            end

            // Stage 1: read the oldest complete request's next words, in issue order.
            check_valid <= head_ready;
            if (head_ready) begin
                read_rotation <= read_base[LANE_BITS-1:0];
                check_lanes <= drain_lanes;
                check_offset <= slot_offset[head_tag] + {51'd0, drain_word, 2'b00};
                check_reseed <= drain_word == 11'd0 && slot_offset[head_tag][11:0] == 12'd0;
                if (drain_last) begin
                    drain_word <= 11'd0;
                    head_tag <= head_tag + 1'b1;
                end else begin
                    drain_word <= drain_word + {6'd0, drain_lanes};
                end
            end

            // Stage 2: check and CRC.
            if (check_valid) begin
                crc_state <= crc_next;
                crc32 <= ~crc_next;
                bit_errors <= errors_next;
                error_found <= found_next;
                if (!error_found && found_next) first_error_offset <= first_error_next;
                lfsr <= chain[32*check_lanes +: 32];
            end
            outstanding <= outstanding + {6'd0, can_issue} - {6'd0, drain_last};
            if (outstanding[5:0] > max_outstanding) max_outstanding <= outstanding[5:0];
        end
    end
endmodule

`default_nettype wire
