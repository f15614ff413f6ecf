// Counters of one direction's run: busy cycles (start to done), and stalls, i.e. runs of
// cycles without a data beat while the run is active (document 001's "maximum stall" and
// "stalls over the threshold"). Cleared by `clear` at the start of a run.
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_counters (
    input  wire        clk,
    input  wire        rst,
    input  wire        clear,
    input  wire        active,
    input  wire        beat,
    input  wire [31:0] threshold_cycles,
    output reg  [47:0] busy_cycles,
    output reg  [31:0] max_stall_cycles,
    output reg  [31:0] stalls_over_threshold
);
    reg [31:0] stall_cycles;   // length of the current run without data

    always @(posedge clk) begin
        if (rst || clear) begin
            busy_cycles <= 48'd0;
            max_stall_cycles <= 32'd0;
            stalls_over_threshold <= 32'd0;
            stall_cycles <= 32'd0;
        end else if (active) begin
            busy_cycles <= busy_cycles + 48'd1;
            if (beat) begin
                stall_cycles <= 32'd0;
            end else begin
                stall_cycles <= stall_cycles + 32'd1;
                if (stall_cycles + 32'd1 > max_stall_cycles) max_stall_cycles <= stall_cycles + 32'd1;
                // Counted once, when the stall first exceeds the threshold.
                if (stall_cycles == threshold_cycles) stalls_over_threshold <= stalls_over_threshold + 32'd1;
            end
        end else begin
            stall_cycles <= 32'd0;
        end
    end
endmodule

`default_nettype wire
