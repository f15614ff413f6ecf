// Shares the requester request (RQ) interface between the write and the read engine, one
// whole TLP at a time, alternating when both wait (so reads keep flowing during writes).
`timescale 1ns / 1ps
`default_nettype none

module pcieperf_rq_mux #(
    parameter DATA_WIDTH = 256
) (
    input  wire                     clk,
    input  wire                     rst,
    input  wire [DATA_WIDTH-1:0]    a_tdata,
    input  wire [DATA_WIDTH/32-1:0] a_tkeep,
    input  wire                     a_tlast,
    input  wire [61:0]              a_tuser,
    input  wire                     a_tvalid,
    output wire                     a_tready,
    input  wire [DATA_WIDTH-1:0]    b_tdata,
    input  wire [DATA_WIDTH/32-1:0] b_tkeep,
    input  wire                     b_tlast,
    input  wire [61:0]              b_tuser,
    input  wire                     b_tvalid,
    output wire                     b_tready,
    output wire [DATA_WIDTH-1:0]    rq_tdata,
    output wire [DATA_WIDTH/32-1:0] rq_tkeep,
    output wire                     rq_tlast,
    output wire [61:0]              rq_tuser,
    output wire                     rq_tvalid,
    input  wire                     rq_tready
);
    reg locked;      // a TLP is in progress: keep its owner until its last beat
    reg owner;       // 0 = a, 1 = b
    reg last_owner;
    wire pick_b = locked ? owner : (b_tvalid && (!a_tvalid || !last_owner));

    assign rq_tdata  = pick_b ? b_tdata  : a_tdata;
    assign rq_tkeep  = pick_b ? b_tkeep  : a_tkeep;
    assign rq_tlast  = pick_b ? b_tlast  : a_tlast;
    assign rq_tuser  = pick_b ? b_tuser  : a_tuser;
    assign rq_tvalid = pick_b ? b_tvalid : a_tvalid;
    assign a_tready  = !pick_b && rq_tready;
    assign b_tready  = pick_b && rq_tready;

    always @(posedge clk) begin
        if (rst) begin
            locked <= 1'b0;
            owner <= 1'b0;
            last_owner <= 1'b0;
        end else if (rq_tvalid && rq_tready) begin
            locked <= !rq_tlast;
            owner <= pick_b;
            if (rq_tlast) last_owner <= pick_b;
        end
    end
endmodule

`default_nettype wire
