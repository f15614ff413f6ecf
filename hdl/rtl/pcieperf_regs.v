// Register file of the pcieperf core on the completer interfaces (CQ in, CC out): document
// 001 §4's performance-demo map on BAR0-BAR2 exactly as pcieperf's `demo` drives it,
// pcieperf's DMA extension registers from BAR0+0x100, and a 32 KiB RAM on BAR3. 32-bit
// accesses (one DW per request). Addresses, reset values and fields come from
// pcieperf_regmap.vh, generated from hdl/regs/pcieperf.rdl; meanings: docs/regmap.md.
`timescale 1ns / 1ps
`default_nettype none
`include "pcieperf_regmap.vh"

module pcieperf_regs #(
    parameter DATA_WIDTH = 256,
    parameter CLK_HZ = 250000000,
    parameter MAX_TAGS = 32,
    parameter ENABLE_STREAM = 1          // 0: the streaming registers read 0 (synthesis variant)
) (
    input  wire                     clk,
    input  wire                     rst,

    input  wire [DATA_WIDTH-1:0]    cq_tdata,
    input  wire [DATA_WIDTH/32-1:0] cq_tkeep,
    input  wire                     cq_tlast,
    input  wire                     cq_tvalid,
    output wire                     cq_tready,
    output wire [DATA_WIDTH-1:0]    cc_tdata,
    output wire [DATA_WIDTH/32-1:0] cc_tkeep,
    output wire                     cc_tlast,
    output wire                     cc_tvalid,
    input  wire                     cc_tready,

    // Link state from the hard block (configuration status interface).
    input  wire [1:0]               cfg_max_payload,
    input  wire [2:0]               cfg_max_read_req,
    input  wire [1:0]               cfg_current_speed,
    input  wire [2:0]               cfg_negotiated_width,
    input  wire                     cfg_msi_enable,

    // Runs: h2d = read engine, d2h = write engine.
    output reg                      h2d_start,
    output reg                      d2h_start,
    output reg  [63:0]              h2d_base0,
    output reg  [63:0]              h2d_base1,
    output reg  [63:0]              d2h_base0,
    output reg  [63:0]              d2h_base1,
    output reg  [31:0]              chunk_bytes,
    output reg  [47:0]              h2d_total_bytes,
    output reg  [47:0]              d2h_total_bytes,
    output reg  [63:0]              h2d_offset,
    output reg  [63:0]              d2h_offset,
    output reg  [63:0]              seed,
    output reg  [5:0]               tags,
    output reg                      check_enable,
    output wire [31:0]              threshold_cycles,

    input  wire                     h2d_busy,
    input  wire                     d2h_busy,
    input  wire [47:0]              h2d_cycles,
    input  wire [47:0]              d2h_cycles,
    input  wire [31:0]              h2d_max_stall_cycles,
    input  wire [31:0]              d2h_max_stall_cycles,
    input  wire [31:0]              h2d_stalls,
    input  wire [31:0]              d2h_stalls,
    input  wire [31:0]              h2d_crc32,
    input  wire [31:0]              h2d_bit_errors,
    input  wire [63:0]              h2d_first_error_offset,
    input  wire                     h2d_error_found,
    input  wire [31:0]              h2d_completion_errors,
    input  wire [5:0]               h2d_max_outstanding,

    // Streaming mode (pcieperf_stream): configuration out, counters in.
    output reg                      stream_start,
    output reg                      stream_lossy,
    output reg  [63:0]              stream_data_addr,
    output reg  [63:0]              stream_meta_addr,
    output reg  [63:0]              stream_flag_addr,
    output reg  [31:0]              stream_buffers,
    output reg  [31:0]              stream_buffer_bytes,
    output reg  [31:0]              stream_message_bytes,
    output reg  [31:0]              stream_messages,
    output reg  [31:0]              stream_dwell_cycles,
    output reg  [47:0]              stream_duration_cycles,
    output reg  [7:0]               stream_opcode,
    output reg                      stream_doorbell,
    output reg  [31:0]              stream_doorbell_count,
    output wire [63:0]              device_clock,
    input  wire                     stream_busy,
    input  wire [31:0]              stream_free_buffers,
    input  wire [31:0]              stream_produced,
    input  wire [31:0]              stream_sent,
    input  wire [31:0]              stream_dropped,
    input  wire [31:0]              stream_wait_cycles,
    input  wire [31:0]              stream_max_wait_cycles,
    input  wire [31:0]              stream_rq_stall_cycles,
    input  wire [47:0]              stream_cycles
);
    localparam LANES = DATA_WIDTH / 32;
    // Cycles per stall unit of document 001 (16 ns).
    localparam UNIT_CYCLES = CLK_HZ / (1000000000 / `PCIEPERF_MAX_STALL_UNIT_NS);
    localparam [47:0] TENTH_CYCLES = 48'(CLK_HZ) / 48'd10;   // cycles per 0.1 s result unit

    // ---- registers --------------------------------------------------------------------------
    reg [31:0] buffer1, buffer2, fixed, block_amount, threshold, start_code;
    reg [63:0] dma_h2d_addr, dma_d2h_addr;
    reg [31:0] dma_h2d_bytes, dma_d2h_bytes;
    reg [63:0] dma_h2d_offset, dma_d2h_offset;
    reg [31:0] tx_result, rx_result;               // 0.1 s units, 0 while running
    reg [63:0] mode_cycles [1:3];                  // per demo mode: 1 read, 2 write, 3 both
    reg        demo_running;
    reg [1:0]  demo_mode;
    reg [63:0] clock;                              // free-running device clock
    reg [31:0] clock_high_latched;
    reg [31:0] ram [0:`PCIEPERF_RAM_BYTES/4-1];    // BAR3

    assign threshold_cycles = threshold * UNIT_CYCLES;
    assign device_clock = clock;
    // Nothing may start while another engine or a stream runs.
    wire engines_idle = !h2d_busy && !d2h_busy && !stream_busy;

    function [31:0] tenths;
        input [47:0] cycles;
        reg [47:0] t;
        begin
            t = (cycles + TENTH_CYCLES - 1) / TENTH_CYCLES;
            tenths = (t == 48'd0) ? 32'd1 : t[31:0];
        end
    endfunction

    wire [31:0] max_stall_cycles = (h2d_max_stall_cycles > d2h_max_stall_cycles) ? h2d_max_stall_cycles : d2h_max_stall_cycles;
    wire [5:0]  width_lanes = 6'd1 << cfg_negotiated_width;
    // PCI-status word, document 001 §3 layout (bits the hard block does not report are 0).
    reg [31:0] pci_status;
    always @* begin
        pci_status = 32'd0;
        pci_status[`PCIEPERF_PCI_STATUS_MPS_MSB:`PCIEPERF_PCI_STATUS_MPS_LSB] = {1'b0, cfg_max_payload};
        pci_status[`PCIEPERF_PCI_STATUS_MRRS_MSB:`PCIEPERF_PCI_STATUS_MRRS_LSB] = cfg_max_read_req;
        pci_status[`PCIEPERF_PCI_STATUS_GENERATION_MSB:`PCIEPERF_PCI_STATUS_GENERATION_LSB] = {2'd0, cfg_current_speed} + 4'd1;
        pci_status[`PCIEPERF_PCI_STATUS_WIDTH_MSB:`PCIEPERF_PCI_STATUS_WIDTH_LSB] = width_lanes;
        pci_status[`PCIEPERF_PCI_STATUS_MSI_LSB] = cfg_msi_enable;
    end

    // ---- completer request: collect the descriptor (DW0-3) and the first data DW ------------
    localparam [1:0] S_RX = 2'd0, S_EXEC = 2'd1, S_CC = 2'd2;
    reg [1:0]   state;
    reg [159:0] request;       // DW0..DW4
    reg [10:0]  cq_beat;
    reg [127:0] completion;    // CC descriptor DW0..2 + data DW3
    reg [1:0]   cc_beat;
    integer i;
    reg [15:0] d;

    assign cq_tready = state == S_RX;

    // The request DWs this beat carries, placed by their index in the TLP.
    reg [159:0] request_next;
    always @* begin
        request_next = request;
        for (i = 0; i < LANES; i = i + 1) begin
            d = 16'({5'd0, cq_beat} * LANES + i);
            if (d < 16'd5 && cq_tkeep[i]) request_next[32*d[2:0] +: 32] = cq_tdata[32*i +: 32];
        end
    end

    wire [63:0] req_addr = {request[63:2], 2'b00};
    wire [3:0]  req_type = request[78:75];
    wire [15:0] req_id = request[95:80];
    wire [7:0]  req_tag = request[103:96];
    wire [7:0]  req_function = request[111:104];
    wire [2:0]  req_bar = request[114:112];
    wire [2:0]  req_tc = request[123:121];
    wire [2:0]  req_attr = request[126:124];
    wire [31:0] req_data = request[159:128];
    // Fields a 32-bit register access does not need: DW count (always 1), address type,
    // poisoned, BAR aperture (BARs are aligned to their size), force ECRC.
    wire        unused = &{1'b0, request[127], request[120:115], request[79], request[74:64], request[1:0], req_addr[63:15]};
    // A register's decode key in the generated map: {BAR, offset in the BAR}.
    wire [14:0] reg_key = {req_bar, req_addr[11:0]};
    wire        ram_access = req_bar == `PCIEPERF_RAM_BAR;
    wire [12:0] ram_word = req_addr[14:2];

    // ---- read side --------------------------------------------------------------------------
    reg [31:0] read_value;
    always @* begin
        read_value = 32'd0;   // unimplemented registers read as zero
        if (ram_access) read_value = ram[ram_word];
        else case (reg_key)
            `PCIEPERF_VERSION: read_value = `PCIEPERF_VERSION_RESET;
            `PCIEPERF_START: read_value = start_code;
            // RX errors: wrong bits, plus completions that failed (UR, CA, poisoned): each
            // one is data the device never received.
            `PCIEPERF_RX_BIT_ERRORS: read_value = h2d_bit_errors + h2d_completion_errors;
            `PCIEPERF_TX_BIT_ERRORS: read_value = 32'd0;    // the host checks d2h data itself
            `PCIEPERF_DMA_CONTROL: begin
                read_value[`PCIEPERF_DMA_CONTROL_H2D_LSB] = h2d_busy;
                read_value[`PCIEPERF_DMA_CONTROL_D2H_LSB] = d2h_busy;
            end
            `PCIEPERF_DMA_H2D_ADDR: read_value = dma_h2d_addr[31:0];
            `PCIEPERF_DMA_H2D_ADDR_HIGH: read_value = dma_h2d_addr[63:32];
            `PCIEPERF_DMA_D2H_ADDR: read_value = dma_d2h_addr[31:0];
            `PCIEPERF_DMA_D2H_ADDR_HIGH: read_value = dma_d2h_addr[63:32];
            `PCIEPERF_DMA_H2D_BYTES: read_value = dma_h2d_bytes;
            `PCIEPERF_DMA_D2H_BYTES: read_value = dma_d2h_bytes;
            `PCIEPERF_DMA_H2D_OFFSET: read_value = dma_h2d_offset[31:0];
            `PCIEPERF_DMA_H2D_OFFSET_HIGH: read_value = dma_h2d_offset[63:32];
            `PCIEPERF_DMA_D2H_OFFSET: read_value = dma_d2h_offset[31:0];
            `PCIEPERF_DMA_D2H_OFFSET_HIGH: read_value = dma_d2h_offset[63:32];
            `PCIEPERF_SEED: read_value = seed[31:0];
            `PCIEPERF_SEED_HIGH: read_value = seed[63:32];
            `PCIEPERF_TAGS: read_value = {26'd0, tags};
            `PCIEPERF_H2D_CYCLES: read_value = h2d_cycles[31:0];
            `PCIEPERF_H2D_CYCLES_HIGH: read_value = {16'd0, h2d_cycles[47:32]};
            `PCIEPERF_D2H_CYCLES: read_value = d2h_cycles[31:0];
            `PCIEPERF_D2H_CYCLES_HIGH: read_value = {16'd0, d2h_cycles[47:32]};
            `PCIEPERF_H2D_CRC32: read_value = h2d_crc32;
            `PCIEPERF_ERROR_FOUND: read_value = {31'd0, h2d_error_found};
            `PCIEPERF_FIRST_ERROR: read_value = h2d_first_error_offset[31:0];
            `PCIEPERF_FIRST_ERROR_HIGH: read_value = h2d_first_error_offset[63:32];
            `PCIEPERF_CLOCK: read_value = clock[31:0];
            `PCIEPERF_CLOCK_HIGH: read_value = clock_high_latched;
            `PCIEPERF_CLOCK_HZ: read_value = CLK_HZ;
            `PCIEPERF_COMPLETION_ERRORS: read_value = h2d_completion_errors;
            `PCIEPERF_MAX_OUTSTANDING: read_value = {26'd0, h2d_max_outstanding};
            `PCIEPERF_MAX_STALL_CYCLES: read_value = max_stall_cycles;
            `PCIEPERF_CORE_INFO: begin
                read_value[`PCIEPERF_CORE_INFO_MAX_TAGS_MSB:`PCIEPERF_CORE_INFO_MAX_TAGS_LSB] = MAX_TAGS[15:0];
                read_value[`PCIEPERF_CORE_INFO_DATA_WIDTH_MSB:`PCIEPERF_CORE_INFO_DATA_WIDTH_LSB] = DATA_WIDTH[15:0];
            end
            `PCIEPERF_BUFFER1: read_value = buffer1;
            `PCIEPERF_BUFFER2: read_value = buffer2;
            `PCIEPERF_FIXED: read_value = fixed;
            `PCIEPERF_TX_RESULT: read_value = tx_result;
            `PCIEPERF_RX_RESULT: read_value = rx_result;
            `PCIEPERF_BLOCK_AMOUNT: read_value = block_amount;
            `PCIEPERF_MAX_STALL: read_value = demo_running ? 32'd0 : (max_stall_cycles + UNIT_CYCLES / 2) / UNIT_CYCLES;
            `PCIEPERF_THRESHOLD: read_value = threshold;
            `PCIEPERF_STALL_COUNT: read_value = demo_running ? 32'd0 : h2d_stalls + d2h_stalls;
            `PCIEPERF_PCI_STATUS: read_value = pci_status;
            `PCIEPERF_WRITE_CYCLES: read_value = mode_cycles[2][31:0];
            `PCIEPERF_READ_CYCLES: read_value = mode_cycles[1][31:0];
            `PCIEPERF_READ_WRITE_CYCLES: read_value = mode_cycles[3][31:0];
            `PCIEPERF_WRITE_CYCLES_HIGH: read_value = mode_cycles[2][63:32];
            `PCIEPERF_READ_CYCLES_HIGH: read_value = mode_cycles[1][63:32];
            `PCIEPERF_READ_WRITE_CYCLES_HIGH: read_value = mode_cycles[3][63:32];
            default: read_value = (ENABLE_STREAM != 0) ? stream_value : 32'd0;
        endcase
    end

    // The streaming mode's registers (docs/hdl.md#streaming-mode).
    reg [31:0] stream_value;
    always @* begin
        stream_value = 32'd0;
        case (reg_key)
            `PCIEPERF_STREAM_CONTROL: begin
                stream_value[`PCIEPERF_STREAM_CONTROL_RUN_LSB] = stream_busy;
                stream_value[`PCIEPERF_STREAM_CONTROL_LOSSY_LSB] = stream_lossy;
            end
            `PCIEPERF_STREAM_DATA_ADDR: stream_value = stream_data_addr[31:0];
            `PCIEPERF_STREAM_DATA_ADDR_HIGH: stream_value = stream_data_addr[63:32];
            `PCIEPERF_STREAM_META_ADDR: stream_value = stream_meta_addr[31:0];
            `PCIEPERF_STREAM_META_ADDR_HIGH: stream_value = stream_meta_addr[63:32];
            `PCIEPERF_STREAM_FLAG_ADDR: stream_value = stream_flag_addr[31:0];
            `PCIEPERF_STREAM_FLAG_ADDR_HIGH: stream_value = stream_flag_addr[63:32];
            `PCIEPERF_STREAM_BUFFERS: stream_value = stream_buffers;
            `PCIEPERF_STREAM_BUFFER_BYTES: stream_value = stream_buffer_bytes;
            `PCIEPERF_STREAM_MESSAGE_BYTES: stream_value = stream_message_bytes;
            `PCIEPERF_STREAM_MESSAGES: stream_value = stream_messages;
            `PCIEPERF_STREAM_DWELL: stream_value = stream_dwell_cycles;
            `PCIEPERF_STREAM_OPCODE: stream_value = {24'd0, stream_opcode};
            `PCIEPERF_STREAM_DOORBELL: stream_value = stream_free_buffers;
            `PCIEPERF_STREAM_PRODUCED: stream_value = stream_produced;
            `PCIEPERF_STREAM_SENT: stream_value = stream_sent;
            `PCIEPERF_STREAM_DROPPED: stream_value = stream_dropped;
            `PCIEPERF_STREAM_WAIT_CYCLES: stream_value = stream_wait_cycles;
            `PCIEPERF_STREAM_MAX_WAIT_CYCLES: stream_value = stream_max_wait_cycles;
            `PCIEPERF_STREAM_RQ_STALL_CYCLES: stream_value = stream_rq_stall_cycles;
            `PCIEPERF_STREAM_CYCLES: stream_value = stream_cycles[31:0];
            `PCIEPERF_STREAM_CYCLES_HIGH: stream_value = {16'd0, stream_cycles[47:32]};
            `PCIEPERF_STREAM_DURATION: stream_value = stream_duration_cycles[31:0];
            `PCIEPERF_STREAM_DURATION_HIGH: stream_value = {16'd0, stream_duration_cycles[47:32]};
            default: stream_value = 32'd0;
        endcase
    end

    // ---- completer completion beats ---------------------------------------------------------
    localparam CC_BEATS = (4 + LANES - 1) / LANES;
    reg [DATA_WIDTH-1:0] cc_data;
    reg [LANES-1:0]      cc_keep;
    integer l;
    always @* begin
        cc_data = {DATA_WIDTH{1'b0}};
        cc_keep = {LANES{1'b0}};
        for (l = 0; l < LANES; l = l + 1)
            if ({30'd0, cc_beat} * LANES + l < 4) begin
                cc_data[32*l +: 32] = completion[32*(cc_beat * LANES + l) +: 32];
                cc_keep[l] = 1'b1;
            end
    end
    assign cc_tvalid = state == S_CC;
    assign cc_tdata = cc_data;
    assign cc_tkeep = cc_keep;
    assign cc_tlast = {30'd0, cc_beat} == CC_BEATS - 1;

    // A demo run lasts as long as its slower engine.
    wire [47:0] demo_run_cycles = demo_mode == 2'd1 ? h2d_cycles : demo_mode == 2'd2 ? d2h_cycles
                                : (d2h_cycles > h2d_cycles ? d2h_cycles : h2d_cycles);
    wire demo_ready = buffer1 != 32'd0 && buffer2 != 32'd0 && fixed == `PCIEPERF_FIXED_VALUE && block_amount != 32'd0;
    wire [47:0] demo_bytes = fixed[15:0] * block_amount;

    always @(posedge clk) begin
        if (rst) begin
            state <= S_RX;
            request <= 160'd0;
            cq_beat <= 11'd0;
            completion <= 128'd0;
            cc_beat <= 2'd0;
            buffer1 <= 32'd0; buffer2 <= 32'd0; fixed <= 32'd0; block_amount <= 32'd0;
            threshold <= `PCIEPERF_THRESHOLD_RESET; start_code <= 32'd0;
            dma_h2d_addr <= 64'd0; dma_d2h_addr <= 64'd0;
            dma_h2d_bytes <= 32'd0; dma_d2h_bytes <= 32'd0;
            dma_h2d_offset <= 64'd0; dma_d2h_offset <= 64'd0;
            seed <= 64'd0; tags <= MAX_TAGS[5:0];
            tx_result <= 32'd0; rx_result <= 32'd0;
            mode_cycles[1] <= 64'd0; mode_cycles[2] <= 64'd0; mode_cycles[3] <= 64'd0;
            demo_running <= 1'b0; demo_mode <= 2'd0;
            clock <= 64'd0; clock_high_latched <= 32'd0;
            h2d_start <= 1'b0; d2h_start <= 1'b0;
            h2d_base0 <= 64'd0; h2d_base1 <= 64'd0; d2h_base0 <= 64'd0; d2h_base1 <= 64'd0;
            chunk_bytes <= 32'd0; h2d_total_bytes <= 48'd0; d2h_total_bytes <= 48'd0;
            h2d_offset <= 64'd0; d2h_offset <= 64'd0; check_enable <= 1'b0;
            stream_start <= 1'b0; stream_lossy <= 1'b0;
            stream_data_addr <= 64'd0; stream_meta_addr <= 64'd0; stream_flag_addr <= 64'd0;
            stream_buffers <= 32'd0; stream_buffer_bytes <= 32'd0; stream_message_bytes <= 32'd0;
            stream_messages <= 32'd0; stream_dwell_cycles <= 32'd0; stream_opcode <= 8'd0;
            stream_duration_cycles <= 48'd0;
            stream_doorbell <= 1'b0; stream_doorbell_count <= 32'd0;
        end else begin
            clock <= clock + 64'd1;
            h2d_start <= 1'b0;
            d2h_start <= 1'b0;
            stream_start <= 1'b0;
            stream_doorbell <= 1'b0;

            // A demo run ends when both its engines are idle: results become visible.
            if (demo_running && !h2d_start && !d2h_start && !h2d_busy && !d2h_busy) begin
                demo_running <= 1'b0;
                if (demo_mode[1]) tx_result <= tenths(d2h_cycles);
                if (demo_mode[0]) rx_result <= tenths(h2d_cycles);
                mode_cycles[demo_mode] <= {16'd0, demo_run_cycles};
            end

            case (state)
                S_RX: if (cq_tvalid) begin
                    request <= request_next;
                    cq_beat <= cq_tlast ? 11'd0 : cq_beat + 11'd1;
                    if (cq_tlast) state <= S_EXEC;
                end
                S_EXEC: begin
                    state <= S_RX;
                    if (req_type == 4'b0000) begin
                        // Memory read: one DW back. CC descriptor: lower address, byte count 4,
                        // DW count 1, status SC, requester ID, tag, function, TC, attributes.
                        completion <= {read_value, 1'b0, req_attr, req_tc, 1'b0, 8'd0, req_function, req_tag,
                                       req_id, 1'b0, 1'b0, 3'd0, 11'd1,
                                       2'd0, 1'b0, 13'd4, 6'd0, 2'd0, 1'b0, req_addr[6:0]};
                        cc_beat <= 2'd0;
                        state <= S_CC;
                        if (!ram_access && reg_key == `PCIEPERF_CLOCK) clock_high_latched <= clock[63:32];
                    end else if (req_type == 4'b0001) begin
                        if (ram_access) ram[ram_word] <= req_data;
                        else case (reg_key)
                            `PCIEPERF_START: begin
                                // Demo start: 1 read (h2d), 2 write (d2h), 3 both; ignored
                                // unless buffers, fixed parameter and block amount are set.
                                start_code <= req_data;
                                if (demo_ready && req_data[1:0] != 2'd0 && engines_idle) begin
                                    h2d_start <= req_data[0];
                                    d2h_start <= req_data[1];
                                    h2d_base0 <= {32'd0, buffer1}; h2d_base1 <= {32'd0, buffer2};
                                    d2h_base0 <= {32'd0, buffer1}; d2h_base1 <= {32'd0, buffer2};
                                    chunk_bytes <= fixed;
                                    h2d_total_bytes <= demo_bytes; d2h_total_bytes <= demo_bytes;
                                    h2d_offset <= 64'd0; d2h_offset <= 64'd0;
                                    check_enable <= 1'b0;   // the demo's buffers hold no pattern
                                    demo_running <= 1'b1;
                                    demo_mode <= req_data[1:0];
                                    if (req_data[1]) tx_result <= 32'd0;
                                    if (req_data[0]) rx_result <= 32'd0;
                                end
                            end
                            `PCIEPERF_DMA_CONTROL: if (engines_idle && !demo_running) begin
                                // DMA start: h2d from dma_h2d_*, d2h from dma_d2h_*.
                                h2d_start <= req_data[`PCIEPERF_DMA_CONTROL_H2D_LSB];
                                d2h_start <= req_data[`PCIEPERF_DMA_CONTROL_D2H_LSB];
                                h2d_base0 <= dma_h2d_addr; h2d_base1 <= dma_h2d_addr;
                                d2h_base0 <= dma_d2h_addr; d2h_base1 <= dma_d2h_addr;
                                chunk_bytes <= 32'd0;
                                h2d_total_bytes <= {16'd0, dma_h2d_bytes}; d2h_total_bytes <= {16'd0, dma_d2h_bytes};
                                h2d_offset <= dma_h2d_offset; d2h_offset <= dma_d2h_offset;
                                check_enable <= 1'b1;
                            end
                            `PCIEPERF_DMA_H2D_ADDR: dma_h2d_addr[31:0] <= req_data;
                            `PCIEPERF_DMA_H2D_ADDR_HIGH: dma_h2d_addr[63:32] <= req_data;
                            `PCIEPERF_DMA_D2H_ADDR: dma_d2h_addr[31:0] <= req_data;
                            `PCIEPERF_DMA_D2H_ADDR_HIGH: dma_d2h_addr[63:32] <= req_data;
                            `PCIEPERF_DMA_H2D_BYTES: dma_h2d_bytes <= req_data;
                            `PCIEPERF_DMA_D2H_BYTES: dma_d2h_bytes <= req_data;
                            `PCIEPERF_DMA_H2D_OFFSET: dma_h2d_offset[31:0] <= req_data;
                            `PCIEPERF_DMA_H2D_OFFSET_HIGH: dma_h2d_offset[63:32] <= req_data;
                            `PCIEPERF_DMA_D2H_OFFSET: dma_d2h_offset[31:0] <= req_data;
                            `PCIEPERF_DMA_D2H_OFFSET_HIGH: dma_d2h_offset[63:32] <= req_data;
                            `PCIEPERF_SEED: seed[31:0] <= req_data;
                            `PCIEPERF_SEED_HIGH: seed[63:32] <= req_data;
                            `PCIEPERF_TAGS: tags <= (req_data == 32'd0) ? 6'd1
                                                  : (req_data > MAX_TAGS) ? MAX_TAGS[5:0] : req_data[5:0];
                            `PCIEPERF_BUFFER1: buffer1 <= req_data;
                            `PCIEPERF_BUFFER2: buffer2 <= req_data;
                            `PCIEPERF_FIXED: fixed <= req_data;
                            `PCIEPERF_BLOCK_AMOUNT: block_amount <= req_data;
                            `PCIEPERF_THRESHOLD: threshold <= req_data;
                            `PCIEPERF_STREAM_CONTROL: begin
                                stream_lossy <= req_data[`PCIEPERF_STREAM_CONTROL_LOSSY_LSB];
                                stream_start <= req_data[`PCIEPERF_STREAM_CONTROL_RUN_LSB] && engines_idle && !demo_running;
                            end
                            `PCIEPERF_STREAM_DATA_ADDR: stream_data_addr[31:0] <= req_data;
                            `PCIEPERF_STREAM_DATA_ADDR_HIGH: stream_data_addr[63:32] <= req_data;
                            `PCIEPERF_STREAM_META_ADDR: stream_meta_addr[31:0] <= req_data;
                            `PCIEPERF_STREAM_META_ADDR_HIGH: stream_meta_addr[63:32] <= req_data;
                            `PCIEPERF_STREAM_FLAG_ADDR: stream_flag_addr[31:0] <= req_data;
                            `PCIEPERF_STREAM_FLAG_ADDR_HIGH: stream_flag_addr[63:32] <= req_data;
                            `PCIEPERF_STREAM_BUFFERS: stream_buffers <= req_data;
                            `PCIEPERF_STREAM_BUFFER_BYTES: stream_buffer_bytes <= req_data;
                            `PCIEPERF_STREAM_MESSAGE_BYTES: stream_message_bytes <= req_data;
                            `PCIEPERF_STREAM_MESSAGES: stream_messages <= req_data;
                            `PCIEPERF_STREAM_DWELL: stream_dwell_cycles <= req_data;
                            `PCIEPERF_STREAM_DURATION: stream_duration_cycles[31:0] <= req_data;
                            `PCIEPERF_STREAM_DURATION_HIGH: stream_duration_cycles[47:32] <= req_data[15:0];
                            `PCIEPERF_STREAM_OPCODE: stream_opcode <= req_data[7:0];
                            `PCIEPERF_STREAM_DOORBELL: begin
                                stream_doorbell <= 1'b1;
                                stream_doorbell_count <= req_data;
                            end
                            default: ;
                        endcase
                    end
                end
                S_CC: if (cc_tready) begin
                    cc_beat <= cc_beat + 2'd1;
                    if (cc_tlast) state <= S_RX;
                end
                default: state <= S_RX;
            endcase
        end
    end
endmodule

`default_nettype wire
