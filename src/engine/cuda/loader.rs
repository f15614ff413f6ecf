//! Whether a CUDA driver library is there, asked before the first cudarc call: cudarc loads
//! libcuda on first use and panics when it is missing, and pcieperf must run without CUDA.

use std::sync::OnceLock;

/// Names the driver installs, most specific first (`libcuda.so` is often only in -dev packages).
const NAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// The driver library found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: &'static str,
    /// It exports `pcieperf_fake_cuda`: the tests' fake library (tests/fake-cuda), not a driver.
    pub fake: bool,
}

impl Library {
    /// How results taken through this library are described.
    pub fn label(&self) -> &'static str {
        if self.fake { "fake CUDA driver library (tests)" } else { "CUDA driver" }
    }
}

/// The library, or why there is none (one line). Probed once per process.
pub fn probe() -> Result<Library, String> {
    static FOUND: OnceLock<Result<Library, String>> = OnceLock::new();
    FOUND.get_or_init(probe_now).clone()
}

fn probe_now() -> Result<Library, String> {
    let mut why = Vec::new();
    for name in NAMES {
        // SAFETY: loading runs the library's initialisers; a CUDA driver library's are the
        // ones every CUDA program runs.
        let library = match unsafe { libloading::Library::new(name) } {
            Ok(library) => library,
            Err(error) => {
                // libloading's message is "dlopen failed"; dlerror's text is its source.
                let detail = std::error::Error::source(&error).map_or_else(|| error.to_string(), |s| s.to_string());
                why.push(first_line(&detail).to_string());
                continue;
            }
        };
        // SAFETY: only the symbols' presence is asked; nothing is called.
        let has = |symbol: &[u8]| unsafe { library.get::<*const u8>(symbol) }.is_ok();
        if !has(b"cuInit\0") {
            why.push(format!("{name} exports no cuInit (not a CUDA driver library)"));
            continue;
        }
        let fake = has(b"pcieperf_fake_cuda\0");
        // Kept loaded: cudarc opens the same library and the process uses it to the end.
        std::mem::forget(library);
        return Ok(Library { name, fake });
    }
    Err(format!("no CUDA driver library ({}): install the NVIDIA driver, or put libcuda.so.1 on LD_LIBRARY_PATH", why.join("; ")))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
