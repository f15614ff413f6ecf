// Streaming mode (document 003's OCDP push): the device writes messages into a ring of host
// buffers. Per message: the payload as posted writes of at most MaxPayload bytes that never
// cross a 4 KiB address boundary, then one 16-byte metadata write (length, opcode and seq_number
// number, the device clock at the message's start), then a 1-DW flag write, then `dwell_cycles`
// idle cycles. The host consumes buffers in ring order and gives them back through the doorbell
// (`doorbell_count` buffers per write). With no free buffer the device waits (lossless) or drops
// the message, counting it and skipping its seq_number number (lossy). The stream ends after
// `messages` or, with a `duration_cycles`, once that many cycles passed since its first message
// started, whichever comes first. Layout: docs/hdl.md.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_stream #(
    parameter DATA_WIDTH = 256
) (
    input  wire                     clk,
    input  wire                     rst,
    input  wire                     start,
    input  wire                     lossy,
    input  wire [63:0]              data_addr,
    input  wire [63:0]              meta_addr,
    input  wire [63:0]              flag_addr,
    input  wire [31:0]              buffers,
    input  wire [31:0]              buffer_bytes,
    input  wire [31:0]              message_bytes,
    input  wire [31:0]              messages,
    input  wire [31:0]              dwell_cycles,
    input  wire [47:0]              duration_cycles, // 0: no limit; else no message starts this long after the first
    input  wire [7:0]               opcode,
    input  wire                     doorbell,
    input  wire [31:0]              doorbell_count,
    input  wire [63:0]              now,             // the device clock: message timestamps
    input  wire [12:0]              max_payload_bytes,

    output wire                     busy,
    output reg  [31:0]              free_buffers,
    output reg  [31:0]              produced,
    output reg  [31:0]              sent,
    output reg  [31:0]              dropped,
    output reg  [31:0]              wait_cycles,
    output reg  [31:0]              max_wait_cycles,
    output reg  [31:0]              rq_stall_cycles,
    output reg  [47:0]              run_cycles,

    output wire [DATA_WIDTH-1:0]    rq_tdata,
    output wire [DATA_WIDTH/32-1:0] rq_tkeep,
    output wire                     rq_tlast,
    output wire [61:0]              rq_tuser,
    output wire                     rq_tvalid,
    input  wire                     rq_tready
);
`include "pcieperf_functions.vh"

    localparam LANES = DATA_WIDTH / 32;
    localparam [2:0] S_IDLE = 3'd0, S_NEXT = 3'd1, S_LOAD = 3'd2, S_SEND = 3'd3, S_DWELL = 3'd4;
    // What the next TLP of the current message is.
    localparam [1:0] P_DATA = 2'd0, P_META = 2'd1, P_FLAG = 2'd2, P_DONE = 2'd3;

    reg  [2:0]   state;
    reg  [1:0]   part;            // the next TLP to load
    reg  [1:0]   kind;            // the TLP being sent
    reg  [31:0]  seq_number;        // number of the current message
    reg  [31:0]  buffer_index;    // ring slot of the current message
    reg  [63:0]  buffer_addr, meta_ptr, flag_ptr;   // the current slot's three places
    reg  [63:0]  walk_addr;       // where the next data TLP goes
    reg  [31:0]  data_left;       // payload bytes not yet loaded
    reg  [15:0]  word_index;      // payload DW index of the next data TLP
    reg  [15:0]  tlp_word_base;   // payload DW index of the TLP being sent
    reg  [63:0]  message_start;   // device clock when the message started
    reg  [31:0]  flag_value;
    reg  [31:0]  dwell_left;
    reg  [31:0]  current_wait;
    reg  [127:0] descriptor;
    reg  [10:0]  tlp_words;
    reg  [10:0]  beat;

    wire [12:0] data_len = tlp_bytes(max_payload_bytes, {16'd0, data_left}, walk_addr[11:0], 12'd0, 32'hFFFF_FFFF);
    // Sizes are multiples of 4 and places DW-aligned (metadata 16-byte aligned) by the registers' contract.
    wire        unused_low_bits = &{1'b0, data_len[1:0], data_addr[1:0], meta_addr[3:0], flag_addr[1:0], walk_addr[1:0],
                                   meta_ptr[3:0], flag_ptr[1:0]};

    // Lanes of this beat: DW index d = beat * LANES + lane; d < 4 is the descriptor.
    reg  [DATA_WIDTH-1:0] beat_data;
    reg  [LANES-1:0]      beat_keep;
    reg                   beat_last;
    reg  [15:0]           d, p;
    integer lane;
    always @* begin
        beat_data = {DATA_WIDTH{1'b0}};
        beat_keep = {LANES{1'b0}};
        p = 16'd0;
        for (lane = 0; lane < LANES; lane = lane + 1) begin
            d = 16'({5'd0, beat} * LANES + lane);
            p = d - 16'd4;
            if (d < 16'd4) begin
                beat_data[32*lane +: 32] = descriptor[32*d[1:0] +: 32];
                beat_keep[lane] = 1'b1;
            end else if (d < 16'd4 + {5'd0, tlp_words}) begin
                case (kind)
                    P_DATA: beat_data[32*lane +: 32] = {seq_number[15:0], tlp_word_base + p};
                    P_META: case (p[1:0])
                        2'd0: beat_data[32*lane +: 32] = message_bytes;
                        2'd1: beat_data[32*lane +: 32] = {opcode, seq_number[23:0]};
                        2'd2: beat_data[32*lane +: 32] = message_start[31:0];
                        default: beat_data[32*lane +: 32] = message_start[63:32];
                    endcase
                    default: beat_data[32*lane +: 32] = flag_value;
                endcase
                beat_keep[lane] = 1'b1;
            end
        end
        beat_last = ({21'd0, beat} + 32'd1) * LANES >= 32'd4 + {21'd0, tlp_words};
    end

    wire tlp_end = state == S_SEND && rq_tready && beat_last;
    // The next TLP is set up in LOAD, then during each TLP's last beat: no idle cycle between
    // the TLPs of one message.
    wire load = state == S_LOAD || (tlp_end && part != P_DONE);
    wire message_end = tlp_end && part == P_DONE;
    // run_cycles counts from the first message's start (its S_NEXT cycle reads 0): past the
    // duration the stream numbers no more messages, so nothing after it is sent, dropped or waited for.
    wire out_of_time = duration_cycles != 48'd0 && run_cycles >= duration_cycles;
    wire more = produced != messages && !out_of_time;
    wire take_buffer = state == S_NEXT && more && free_buffers != 32'd0;
    wire drop = state == S_NEXT && more && free_buffers == 32'd0 && lossy;
    wire last_slot = buffer_index + 32'd1 >= buffers;

    assign rq_tvalid = state == S_SEND;
    assign rq_tdata = beat_data;
    assign rq_tkeep = beat_keep;
    assign rq_tlast = beat_last;
    // first_be = 0xF, last_be = 0xF unless the TLP is one DW.
    assign rq_tuser = {54'd0, (tlp_words > 11'd1) ? 4'hF : 4'h0, 4'hF};
    assign busy = state != S_IDLE;

    // RQ descriptor of a memory write: address, DW count, type 0001, tag 0.
    function [127:0] write_descriptor;
        input [61:0] addr_dw;    // the address in DWs
        input [10:0] words;
        write_descriptor = {32'd0, 16'd0, 1'b0, 4'b0001, words, addr_dw, 2'b00};
    endfunction

    always @(posedge clk) begin
        if (rst) begin
            state <= S_IDLE;
            part <= P_DATA;
            kind <= P_DATA;
            seq_number <= 32'd0;
            buffer_index <= 32'd0;
            buffer_addr <= 64'd0; meta_ptr <= 64'd0; flag_ptr <= 64'd0; walk_addr <= 64'd0;
            data_left <= 32'd0;
            word_index <= 16'd0;
            tlp_word_base <= 16'd0;
            message_start <= 64'd0;
            flag_value <= 32'd0;
            dwell_left <= 32'd0;
            current_wait <= 32'd0;
            descriptor <= 128'd0;
            tlp_words <= 11'd0;
            beat <= 11'd0;
            free_buffers <= 32'd0;
            produced <= 32'd0; sent <= 32'd0; dropped <= 32'd0;
            wait_cycles <= 32'd0; max_wait_cycles <= 32'd0; rq_stall_cycles <= 32'd0;
            run_cycles <= 48'd0;
        end else begin
            // Buffers come back through the doorbell; one leaves when a message takes it.
            free_buffers <= free_buffers + (doorbell ? doorbell_count : 32'd0) - (take_buffer ? 32'd1 : 32'd0);
            if (busy) run_cycles <= run_cycles + 48'd1;
            if (state == S_SEND && !rq_tready) rq_stall_cycles <= rq_stall_cycles + 32'd1;

            case (state)
                S_IDLE: if (start) begin
                    state <= S_NEXT;
                    free_buffers <= buffers;   // every buffer is free at the start
                    seq_number <= 32'd0;
                    buffer_index <= 32'd0;
                    buffer_addr <= {data_addr[63:2], 2'b00};
                    meta_ptr <= {meta_addr[63:4], 4'd0};
                    flag_ptr <= {flag_addr[63:2], 2'b00};
                    produced <= 32'd0; sent <= 32'd0; dropped <= 32'd0;
                    wait_cycles <= 32'd0; max_wait_cycles <= 32'd0; rq_stall_cycles <= 32'd0;
                    current_wait <= 32'd0;
                    run_cycles <= 48'd0;
                end
                S_NEXT: begin
                    if (!more) begin
                        state <= S_IDLE;
                    end else if (take_buffer) begin
                        message_start <= now;
                        walk_addr <= buffer_addr;
                        data_left <= message_bytes;
                        word_index <= 16'd0;
                        part <= (message_bytes == 32'd0) ? P_META : P_DATA;
                        if (current_wait > max_wait_cycles) max_wait_cycles <= current_wait;
                        current_wait <= 32'd0;
                        state <= S_LOAD;
                    end else if (drop) begin
                        dropped <= dropped + 32'd1;
                        produced <= produced + 32'd1;
                        seq_number <= seq_number + 32'd1;
                        dwell_left <= (dwell_cycles == 32'd0) ? 32'd1 : dwell_cycles;
                        state <= S_DWELL;
                    end else begin
                        wait_cycles <= wait_cycles + 32'd1;
                        current_wait <= current_wait + 32'd1;
                    end
                end
                S_SEND: if (rq_tready) beat <= beat + 11'd1;
                S_DWELL: begin
                    dwell_left <= dwell_left - 32'd1;
                    if (dwell_left <= 32'd1) state <= S_NEXT;
                end
                default: ;
            endcase

            if (load) begin
                beat <= 11'd0;
                kind <= part;
                state <= S_SEND;
                case (part)
                    P_DATA: begin
                        descriptor <= write_descriptor(walk_addr[63:2], data_len[12:2]);
                        tlp_words <= data_len[12:2];
                        tlp_word_base <= word_index;
                        walk_addr <= walk_addr + {51'd0, data_len};
                        data_left <= data_left - {19'd0, data_len};
                        word_index <= word_index + {5'd0, data_len[12:2]};
                        if (data_left == {19'd0, data_len}) part <= P_META;
                    end
                    P_META: begin
                        descriptor <= write_descriptor(meta_ptr[63:2], 11'd4);
                        tlp_words <= 11'd4;
                        part <= P_FLAG;
                    end
                    default: begin
                        // Set: bit 31; the service time so far, start to this write.
                        descriptor <= write_descriptor(flag_ptr[63:2], 11'd1);
                        tlp_words <= 11'd1;
                        flag_value <= {1'b1, 31'(now - message_start)};
                        part <= P_DONE;
                    end
                endcase
            end

            if (message_end) begin
                sent <= sent + 32'd1;
                produced <= produced + 32'd1;
                seq_number <= seq_number + 32'd1;
                buffer_index <= last_slot ? 32'd0 : buffer_index + 32'd1;
                buffer_addr <= last_slot ? {data_addr[63:2], 2'b00} : buffer_addr + {32'd0, buffer_bytes};
                meta_ptr <= last_slot ? {meta_addr[63:4], 4'd0} : meta_ptr + 64'd16;
                flag_ptr <= last_slot ? {flag_addr[63:2], 2'b00} : flag_ptr + 64'd4;
                dwell_left <= dwell_cycles;
                state <= (dwell_cycles == 32'd0) ? S_NEXT : S_DWELL;
            end
        end
    end
endmodule

`default_nettype wire
