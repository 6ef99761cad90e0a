fn main() -> std::process::ExitCode {
    evidence::cli::main()
}
