// pcieperf measurement core: top level on the Xilinx UltraScale+ PCIe hard block's AXI4-Stream
// user interfaces (PG213), DWORD-aligned, no straddling. Completer (CQ/CC): the register file
// on BAR0-BAR3. Requester (RQ/RC): the DMA write (d2h) and read (h2d) engines.
// Ports, clocks, resets and BAR sizes for a board: docs/hdl.md. Not yet run on hardware.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_top #(
    parameter DATA_WIDTH = 256,          // 64, 128 or 256: the hard block's user interface width
    parameter CLK_HZ = 250000000,        // user_clk frequency (62.5, 125 or 250 MHz)
    parameter MAX_TAGS = 32,             // requests in flight at most (reorder slots of 4 KiB)
    // Synthesis variants (docs/hdl.md#resources): 0 leaves the feature out, its registers read 0.
    parameter ENABLE_STREAM = 1,         // streaming mode (pcieperf_stream)
    parameter ENABLE_COUNTERS = 1        // per-direction busy cycles and stall counters
) (
    input  wire                     user_clk,
    input  wire                     user_reset,
    input  wire                     user_lnk_up,

    // Requester request (device -> host TLPs: MWr of the write engine, MRd of the read engine)
    output wire [DATA_WIDTH-1:0]    s_axis_rq_tdata,
    output wire [DATA_WIDTH/32-1:0] s_axis_rq_tkeep,
    output wire                     s_axis_rq_tlast,
    output wire [61:0]              s_axis_rq_tuser,
    output wire                     s_axis_rq_tvalid,
    input  wire                     s_axis_rq_tready,

    // Requester completion (host completions for the read engine)
    input  wire [DATA_WIDTH-1:0]    m_axis_rc_tdata,
    input  wire [DATA_WIDTH/32-1:0] m_axis_rc_tkeep,
    input  wire                     m_axis_rc_tlast,
    input  wire [74:0]              m_axis_rc_tuser,
    input  wire                     m_axis_rc_tvalid,
    output wire                     m_axis_rc_tready,

    // Completer request (host register accesses)
    input  wire [DATA_WIDTH-1:0]    m_axis_cq_tdata,
    input  wire [DATA_WIDTH/32-1:0] m_axis_cq_tkeep,
    input  wire                     m_axis_cq_tlast,
    input  wire [87:0]              m_axis_cq_tuser,
    input  wire                     m_axis_cq_tvalid,
    output wire                     m_axis_cq_tready,

    // Completer completion (register read data)
    output wire [DATA_WIDTH-1:0]    s_axis_cc_tdata,
    output wire [DATA_WIDTH/32-1:0] s_axis_cc_tkeep,
    output wire                     s_axis_cc_tlast,
    output wire [32:0]              s_axis_cc_tuser,
    output wire                     s_axis_cc_tvalid,
    input  wire                     s_axis_cc_tready,

    output wire [1:0]               pcie_cq_np_req,

    input  wire [1:0]               cfg_max_payload,
    input  wire [2:0]               cfg_max_read_req,
    input  wire [1:0]               cfg_current_speed,
    input  wire [2:0]               cfg_negotiated_width,
    input  wire [3:0]               cfg_interrupt_msi_enable,

    // For a testbench or an ILA: the engines are moving data.
    output wire                     h2d_busy,
    output wire                     d2h_busy,
    output wire                     stream_busy
);
    wire rst = user_reset || !user_lnk_up;
    // CQ tuser (byte enables, SOP flags) is not needed for 32-bit register accesses in
    // DWORD-aligned mode; MSI enables of functions 1-3 do not concern function 0.
    wire unused = &{1'b0, m_axis_cq_tuser, cfg_interrupt_msi_enable[3:1]};

    assign pcie_cq_np_req = 2'b11;       // always ready for non-posted requests
    assign s_axis_cc_tuser = 33'd0;

    wire        h2d_start, d2h_start, check_enable;
    wire [63:0] h2d_base0, h2d_base1, d2h_base0, d2h_base1, h2d_offset, d2h_offset, seed;
    wire [31:0] chunk_bytes, threshold_cycles;
    wire [47:0] h2d_total_bytes, d2h_total_bytes;
    wire [5:0]  tags;
    wire [47:0] h2d_cycles, d2h_cycles;
    wire [31:0] h2d_max_stall, d2h_max_stall, h2d_stalls, d2h_stalls;
    wire [31:0] h2d_crc32, h2d_bit_errors, h2d_completion_errors;
    wire [63:0] h2d_first_error_offset;
    wire        h2d_error_found, h2d_beat, d2h_beat;
    wire [5:0]  h2d_max_outstanding;
    wire        stream_start, stream_lossy, stream_doorbell;
    wire [63:0] stream_data_addr, stream_meta_addr, stream_flag_addr, device_clock;
    wire [31:0] stream_buffers, stream_buffer_bytes, stream_message_bytes, stream_messages;
    wire [31:0] stream_dwell_cycles, stream_doorbell_count, stream_free_buffers, stream_produced;
    wire [31:0] stream_sent, stream_dropped, stream_wait_cycles, stream_max_wait_cycles, stream_rq_stall_cycles;
    wire [47:0] stream_cycles, stream_duration_cycles;
    wire [7:0]  stream_opcode;

    // 128 << code, as the Device Control register encodes MPS and MRRS.
    wire [12:0] max_payload_bytes = 13'd128 << cfg_max_payload;
    wire [12:0] max_read_request_bytes = (cfg_max_read_req > 3'd5) ? 13'd4096 : 13'd128 << cfg_max_read_req;

    pcieperf_regs #(.DATA_WIDTH(DATA_WIDTH), .CLK_HZ(CLK_HZ), .MAX_TAGS(MAX_TAGS), .ENABLE_STREAM(ENABLE_STREAM)) regs (
        .clk(user_clk), .rst(rst),
        .cq_tdata(m_axis_cq_tdata), .cq_tkeep(m_axis_cq_tkeep), .cq_tlast(m_axis_cq_tlast),
        .cq_tvalid(m_axis_cq_tvalid), .cq_tready(m_axis_cq_tready),
        .cc_tdata(s_axis_cc_tdata), .cc_tkeep(s_axis_cc_tkeep), .cc_tlast(s_axis_cc_tlast),
        .cc_tvalid(s_axis_cc_tvalid), .cc_tready(s_axis_cc_tready),
        .cfg_max_payload(cfg_max_payload), .cfg_max_read_req(cfg_max_read_req),
        .cfg_current_speed(cfg_current_speed), .cfg_negotiated_width(cfg_negotiated_width),
        .cfg_msi_enable(cfg_interrupt_msi_enable[0]),
        .h2d_start(h2d_start), .d2h_start(d2h_start),
        .h2d_base0(h2d_base0), .h2d_base1(h2d_base1), .d2h_base0(d2h_base0), .d2h_base1(d2h_base1),
        .chunk_bytes(chunk_bytes), .h2d_total_bytes(h2d_total_bytes), .d2h_total_bytes(d2h_total_bytes),
        .h2d_offset(h2d_offset), .d2h_offset(d2h_offset), .seed(seed), .tags(tags),
        .check_enable(check_enable), .threshold_cycles(threshold_cycles),
        .h2d_busy(h2d_busy), .d2h_busy(d2h_busy), .h2d_cycles(h2d_cycles), .d2h_cycles(d2h_cycles),
        .h2d_max_stall_cycles(h2d_max_stall), .d2h_max_stall_cycles(d2h_max_stall),
        .h2d_stalls(h2d_stalls), .d2h_stalls(d2h_stalls), .h2d_crc32(h2d_crc32),
        .h2d_bit_errors(h2d_bit_errors), .h2d_first_error_offset(h2d_first_error_offset),
        .h2d_error_found(h2d_error_found), .h2d_completion_errors(h2d_completion_errors),
        .h2d_max_outstanding(h2d_max_outstanding),
        .stream_start(stream_start), .stream_lossy(stream_lossy), .stream_data_addr(stream_data_addr),
        .stream_meta_addr(stream_meta_addr), .stream_flag_addr(stream_flag_addr),
        .stream_buffers(stream_buffers), .stream_buffer_bytes(stream_buffer_bytes),
        .stream_message_bytes(stream_message_bytes), .stream_messages(stream_messages),
        .stream_dwell_cycles(stream_dwell_cycles), .stream_duration_cycles(stream_duration_cycles),
        .stream_opcode(stream_opcode),
        .stream_doorbell(stream_doorbell), .stream_doorbell_count(stream_doorbell_count),
        .device_clock(device_clock), .stream_busy(stream_busy), .stream_free_buffers(stream_free_buffers),
        .stream_produced(stream_produced), .stream_sent(stream_sent), .stream_dropped(stream_dropped),
        .stream_wait_cycles(stream_wait_cycles), .stream_max_wait_cycles(stream_max_wait_cycles),
        .stream_rq_stall_cycles(stream_rq_stall_cycles), .stream_cycles(stream_cycles)
    );

    wire [DATA_WIDTH-1:0]    wr_tdata, rd_tdata, st_tdata, ws_tdata;
    wire [DATA_WIDTH/32-1:0] wr_tkeep, rd_tkeep, st_tkeep, ws_tkeep;
    wire [61:0]              wr_tuser, rd_tuser, st_tuser, ws_tuser;
    wire                     wr_tlast, wr_tvalid, wr_tready, rd_tlast, rd_tvalid, rd_tready;
    wire                     st_tlast, st_tvalid, st_tready, ws_tlast, ws_tvalid, ws_tready;

    pcieperf_dma_write #(.DATA_WIDTH(DATA_WIDTH)) dma_write (
        .clk(user_clk), .rst(rst), .start(d2h_start),
        .base0(d2h_base0), .base1(d2h_base1), .chunk_bytes(chunk_bytes), .total_bytes(d2h_total_bytes),
        .pattern_offset(d2h_offset), .seed(seed), .max_payload_bytes(max_payload_bytes),
        .busy(d2h_busy), .data_beat(d2h_beat),
        .rq_tdata(wr_tdata), .rq_tkeep(wr_tkeep), .rq_tlast(wr_tlast), .rq_tuser(wr_tuser),
        .rq_tvalid(wr_tvalid), .rq_tready(wr_tready)
    );

    pcieperf_dma_read #(.DATA_WIDTH(DATA_WIDTH), .MAX_TAGS(MAX_TAGS)) dma_read (
        .clk(user_clk), .rst(rst), .start(h2d_start),
        .base0(h2d_base0), .base1(h2d_base1), .chunk_bytes(chunk_bytes), .total_bytes(h2d_total_bytes),
        .pattern_offset(h2d_offset), .seed(seed), .max_read_request_bytes(max_read_request_bytes),
        .tags(tags), .check_enable(check_enable), .busy(h2d_busy), .data_beat(h2d_beat),
        .crc32(h2d_crc32), .bit_errors(h2d_bit_errors), .first_error_offset(h2d_first_error_offset),
        .error_found(h2d_error_found), .completion_errors(h2d_completion_errors),
        .max_outstanding(h2d_max_outstanding),
        .rq_tdata(rd_tdata), .rq_tkeep(rd_tkeep), .rq_tlast(rd_tlast), .rq_tuser(rd_tuser),
        .rq_tvalid(rd_tvalid), .rq_tready(rd_tready),
        .rc_tdata(m_axis_rc_tdata), .rc_tkeep(m_axis_rc_tkeep), .rc_tlast(m_axis_rc_tlast),
        .rc_tuser(m_axis_rc_tuser), .rc_tvalid(m_axis_rc_tvalid), .rc_tready(m_axis_rc_tready)
    );

    generate
        if (ENABLE_STREAM != 0) begin : streaming
            pcieperf_stream #(.DATA_WIDTH(DATA_WIDTH)) stream (
                .clk(user_clk), .rst(rst), .start(stream_start), .lossy(stream_lossy),
                .data_addr(stream_data_addr), .meta_addr(stream_meta_addr), .flag_addr(stream_flag_addr),
                .buffers(stream_buffers), .buffer_bytes(stream_buffer_bytes), .message_bytes(stream_message_bytes),
                .messages(stream_messages), .dwell_cycles(stream_dwell_cycles),
                .duration_cycles(stream_duration_cycles), .opcode(stream_opcode),
                .doorbell(stream_doorbell), .doorbell_count(stream_doorbell_count), .now(device_clock),
                .max_payload_bytes(max_payload_bytes), .busy(stream_busy), .free_buffers(stream_free_buffers),
                .produced(stream_produced), .sent(stream_sent), .dropped(stream_dropped),
                .wait_cycles(stream_wait_cycles), .max_wait_cycles(stream_max_wait_cycles),
                .rq_stall_cycles(stream_rq_stall_cycles), .run_cycles(stream_cycles),
                .rq_tdata(st_tdata), .rq_tkeep(st_tkeep), .rq_tlast(st_tlast), .rq_tuser(st_tuser),
                .rq_tvalid(st_tvalid), .rq_tready(st_tready)
            );
            // The stream and the write engine never run at once (a start waits for both idle):
            // they share one side of the RQ multiplexer.
            pcieperf_rq_mux #(.DATA_WIDTH(DATA_WIDTH)) write_mux (
                .clk(user_clk), .rst(rst),
                .a_tdata(wr_tdata), .a_tkeep(wr_tkeep), .a_tlast(wr_tlast), .a_tuser(wr_tuser),
                .a_tvalid(wr_tvalid), .a_tready(wr_tready),
                .b_tdata(st_tdata), .b_tkeep(st_tkeep), .b_tlast(st_tlast), .b_tuser(st_tuser),
                .b_tvalid(st_tvalid), .b_tready(st_tready),
                .rq_tdata(ws_tdata), .rq_tkeep(ws_tkeep), .rq_tlast(ws_tlast),
                .rq_tuser(ws_tuser), .rq_tvalid(ws_tvalid), .rq_tready(ws_tready)
            );
        end else begin : no_streaming
            assign {stream_busy, stream_free_buffers, stream_produced, stream_sent, stream_dropped} = 129'd0;
            assign {stream_wait_cycles, stream_max_wait_cycles, stream_rq_stall_cycles, stream_cycles} = 144'd0;
            assign {st_tdata, st_tkeep, st_tlast, st_tuser, st_tvalid, st_tready} = 0;
            assign {ws_tdata, ws_tkeep, ws_tlast, ws_tuser, ws_tvalid} = {wr_tdata, wr_tkeep, wr_tlast, wr_tuser, wr_tvalid};
            assign wr_tready = ws_tready;
            // Configuration the absent stream would have read.
            wire unused_stream = &{1'b0, stream_start, stream_lossy, stream_data_addr, stream_meta_addr,
                                   stream_flag_addr, stream_buffers, stream_buffer_bytes, stream_message_bytes,
                                   stream_messages, stream_dwell_cycles, stream_duration_cycles, stream_opcode, stream_doorbell,
                                   stream_doorbell_count, device_clock, st_tdata, st_tkeep, st_tlast, st_tuser, st_tvalid, st_tready};
        end
    endgenerate

    pcieperf_rq_mux #(.DATA_WIDTH(DATA_WIDTH)) rq_mux (
        .clk(user_clk), .rst(rst),
        .a_tdata(ws_tdata), .a_tkeep(ws_tkeep), .a_tlast(ws_tlast), .a_tuser(ws_tuser),
        .a_tvalid(ws_tvalid), .a_tready(ws_tready),
        .b_tdata(rd_tdata), .b_tkeep(rd_tkeep), .b_tlast(rd_tlast), .b_tuser(rd_tuser),
        .b_tvalid(rd_tvalid), .b_tready(rd_tready),
        .rq_tdata(s_axis_rq_tdata), .rq_tkeep(s_axis_rq_tkeep), .rq_tlast(s_axis_rq_tlast),
        .rq_tuser(s_axis_rq_tuser), .rq_tvalid(s_axis_rq_tvalid), .rq_tready(s_axis_rq_tready)
    );

    generate
        if (ENABLE_COUNTERS != 0) begin : counters
            pcieperf_counters h2d_counters (
                .clk(user_clk), .rst(rst), .clear(h2d_start), .active(h2d_busy), .beat(h2d_beat),
                .threshold_cycles(threshold_cycles), .busy_cycles(h2d_cycles),
                .max_stall_cycles(h2d_max_stall), .stalls_over_threshold(h2d_stalls)
            );

            pcieperf_counters d2h_counters (
                .clk(user_clk), .rst(rst), .clear(d2h_start), .active(d2h_busy), .beat(d2h_beat),
                .threshold_cycles(threshold_cycles), .busy_cycles(d2h_cycles),
                .max_stall_cycles(d2h_max_stall), .stalls_over_threshold(d2h_stalls)
            );
        end else begin : no_counters
            assign {h2d_cycles, d2h_cycles, h2d_max_stall, d2h_max_stall, h2d_stalls, d2h_stalls} = 224'd0;
            wire unused_counters = &{1'b0, threshold_cycles, h2d_beat, d2h_beat};
        end
    endgenerate
endmodule

`default_nettype wire
