// Register file of the pcieperf core on the completer interfaces (CQ in, CC out): document
// 001 §4's performance-demo map on BAR0-BAR2 exactly as pcieperf's `demo` drives it
// (src/engine/sim/regs.rs), pcieperf's DMA extension registers from BAR0+0x100, and a 32 KiB
// RAM on BAR3. 32-bit accesses (one DW per request). Map and meanings: docs/hdl.md.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_regs #(
    parameter DATA_WIDTH = 256,
    parameter CLK_HZ = 250000000,
    parameter MAX_TAGS = 32
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
    input  wire [5:0]               h2d_max_outstanding
);
    localparam LANES = DATA_WIDTH / 32;
    localparam UNIT_CYCLES = CLK_HZ / 62500000;     // cycles per 16 ns unit of document 001
    localparam [47:0] TENTH_CYCLES = 48'(CLK_HZ) / 48'd10;   // cycles per 0.1 s result unit
    localparam [31:0] VERSION = 32'h08021600;
    localparam [31:0] FIXED_VALUE = 32'h2000;

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
    reg [31:0] ram [0:8191];                       // BAR3

    assign threshold_cycles = threshold * UNIT_CYCLES;

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
    wire [31:0] pci_status = {cfg_msi_enable, 5'd0, width_lanes, {2'd0, cfg_current_speed} + 4'd1, 1'b0,
                              cfg_max_read_req, 3'd0, 1'b0, 1'b0, cfg_max_payload, 5'd0};

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
    wire [11:0] reg_offset = req_addr[11:0];
    wire [12:0] ram_word = req_addr[14:2];

    // ---- read side --------------------------------------------------------------------------
    reg [31:0] read_value;
    always @* begin
        read_value = 32'd0;   // unimplemented registers read as zero
        case (req_bar)
            3'd0: case (reg_offset)
                12'h000: read_value = VERSION;
                12'h010: read_value = start_code;
                // RX errors: wrong bits, plus completions that failed (UR, CA, poisoned): each
                // one is data the device never received.
                12'h03C: read_value = h2d_bit_errors + h2d_completion_errors;
                12'h040: read_value = 32'd0;        // TX: the host checks d2h data itself
                12'h100: read_value = {30'd0, d2h_busy, h2d_busy};
                12'h108: read_value = dma_h2d_addr[31:0];
                12'h10C: read_value = dma_h2d_addr[63:32];
                12'h110: read_value = dma_d2h_addr[31:0];
                12'h114: read_value = dma_d2h_addr[63:32];
                12'h118: read_value = dma_h2d_bytes;
                12'h11C: read_value = dma_d2h_bytes;
                12'h120: read_value = dma_h2d_offset[31:0];
                12'h124: read_value = dma_h2d_offset[63:32];
                12'h128: read_value = dma_d2h_offset[31:0];
                12'h12C: read_value = dma_d2h_offset[63:32];
                12'h130: read_value = seed[31:0];
                12'h134: read_value = seed[63:32];
                12'h138: read_value = {26'd0, tags};
                12'h140: read_value = h2d_cycles[31:0];
                12'h144: read_value = {16'd0, h2d_cycles[47:32]};
                12'h148: read_value = d2h_cycles[31:0];
                12'h14C: read_value = {16'd0, d2h_cycles[47:32]};
                12'h150: read_value = h2d_crc32;
                12'h154: read_value = {31'd0, h2d_error_found};
                12'h158: read_value = h2d_first_error_offset[31:0];
                12'h15C: read_value = h2d_first_error_offset[63:32];
                12'h160: read_value = clock[31:0];
                12'h164: read_value = clock_high_latched;
                12'h168: read_value = CLK_HZ;
                12'h16C: read_value = h2d_completion_errors;
                12'h170: read_value = {26'd0, h2d_max_outstanding};
                12'h174: read_value = max_stall_cycles;
                12'h178: read_value = {MAX_TAGS[15:0], DATA_WIDTH[15:0]};
                default: read_value = 32'd0;
            endcase
            3'd1: case (reg_offset)
                12'h004: read_value = buffer1;
                12'h008: read_value = buffer2;
                12'h00C: read_value = fixed;
                default: read_value = 32'd0;
            endcase
            3'd2: case (reg_offset)
                12'h018: read_value = tx_result;
                12'h01C: read_value = rx_result;
                12'h020: read_value = block_amount;
                12'h028: read_value = demo_running ? 32'd0 : (max_stall_cycles + UNIT_CYCLES / 2) / UNIT_CYCLES;
                12'h02C: read_value = threshold;
                12'h030: read_value = demo_running ? 32'd0 : h2d_stalls + d2h_stalls;
                12'h034: read_value = pci_status;
                12'h038: read_value = mode_cycles[2][31:0];
                12'h03C: read_value = mode_cycles[1][31:0];
                12'h040: read_value = mode_cycles[3][31:0];
                12'h044: read_value = mode_cycles[2][63:32];
                12'h048: read_value = mode_cycles[1][63:32];
                12'h04C: read_value = mode_cycles[3][63:32];
                default: read_value = 32'd0;
            endcase
            3'd3: read_value = ram[ram_word];
            default: read_value = 32'd0;
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
    wire demo_ready = buffer1 != 32'd0 && buffer2 != 32'd0 && fixed == FIXED_VALUE && block_amount != 32'd0;
    wire [47:0] demo_bytes = fixed[15:0] * block_amount;

    always @(posedge clk) begin
        if (rst) begin
            state <= S_RX;
            request <= 160'd0;
            cq_beat <= 11'd0;
            completion <= 128'd0;
            cc_beat <= 2'd0;
            buffer1 <= 32'd0; buffer2 <= 32'd0; fixed <= 32'd0; block_amount <= 32'd0;
            threshold <= 32'h0C35; start_code <= 32'd0;
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
        end else begin
            clock <= clock + 64'd1;
            h2d_start <= 1'b0;
            d2h_start <= 1'b0;

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
                        if (req_bar == 3'd0 && reg_offset == 12'h160) clock_high_latched <= clock[63:32];
                    end else if (req_type == 4'b0001) begin
                        case (req_bar)
                            3'd0: case (reg_offset)
                                12'h010: begin
                                    // Demo start: 1 read (h2d), 2 write (d2h), 3 both; ignored
                                    // unless buffers, fixed parameter and block amount are set.
                                    start_code <= req_data;
                                    if (demo_ready && req_data[1:0] != 2'd0 && !h2d_busy && !d2h_busy) begin
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
                                12'h100: if (!h2d_busy && !d2h_busy && !demo_running) begin
                                    // DMA start: bit 0 h2d from dma_h2d_*, bit 1 d2h from dma_d2h_*.
                                    h2d_start <= req_data[0];
                                    d2h_start <= req_data[1];
                                    h2d_base0 <= dma_h2d_addr; h2d_base1 <= dma_h2d_addr;
                                    d2h_base0 <= dma_d2h_addr; d2h_base1 <= dma_d2h_addr;
                                    chunk_bytes <= 32'd0;
                                    h2d_total_bytes <= {16'd0, dma_h2d_bytes}; d2h_total_bytes <= {16'd0, dma_d2h_bytes};
                                    h2d_offset <= dma_h2d_offset; d2h_offset <= dma_d2h_offset;
                                    check_enable <= 1'b1;
                                end
                                12'h108: dma_h2d_addr[31:0] <= req_data;
                                12'h10C: dma_h2d_addr[63:32] <= req_data;
                                12'h110: dma_d2h_addr[31:0] <= req_data;
                                12'h114: dma_d2h_addr[63:32] <= req_data;
                                12'h118: dma_h2d_bytes <= req_data;
                                12'h11C: dma_d2h_bytes <= req_data;
                                12'h120: dma_h2d_offset[31:0] <= req_data;
                                12'h124: dma_h2d_offset[63:32] <= req_data;
                                12'h128: dma_d2h_offset[31:0] <= req_data;
                                12'h12C: dma_d2h_offset[63:32] <= req_data;
                                12'h130: seed[31:0] <= req_data;
                                12'h134: seed[63:32] <= req_data;
                                12'h138: tags <= (req_data == 32'd0) ? 6'd1
                                              : (req_data > MAX_TAGS) ? MAX_TAGS[5:0] : req_data[5:0];
                                default: ;
                            endcase
                            3'd1: case (reg_offset)
                                12'h004: buffer1 <= req_data;
                                12'h008: buffer2 <= req_data;
                                12'h00C: fixed <= req_data;
                                default: ;
                            endcase
                            3'd2: case (reg_offset)
                                12'h020: block_amount <= req_data;
                                12'h02C: threshold <= req_data;
                                default: ;
                            endcase
                            3'd3: ram[ram_word] <= req_data;
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
