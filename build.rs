//! Embedded folders (include_dir!) are rebuilt into the binary when a file
//! in them is added, removed or changed.
fn main() {
    for dir in ["web", "question_bank", "examples/qr-cpu", "harness/cpu", "migrations"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
