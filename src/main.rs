/// Out of memory: a message and exit code 1, not an abort (src/exhaustion.rs).
#[global_allocator]
static ALLOCATOR: pcieperf::exhaustion::ExitOnExhaustion = pcieperf::exhaustion::ExitOnExhaustion;

fn main() {
    std::process::exit(pcieperf::cli::main());
}
