fn main() {
    std::process::exit(pcieperf::cli::main());
}
