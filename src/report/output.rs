//! Output files (`--out`, `--html`, `--metrics` of every command): checked before anything is
//! measured, written so that nothing else is ever destroyed, and never lost; the end of a
//! measuring run ([`emit`]): its views, the partial-file rule and its exit code; and the exit
//! code and one-line message of a command that failed ([`exit_code_for`], [`describe`]).
//!
//! Rules (docs/safety.md):
//! - `-` is standard output.
//! - A path must be a new name or an existing regular file that is writable: directories,
//!   device nodes, FIFOs and sockets are refused, and so are read-only files and the run's own
//!   inputs (the file a `block:FILE` target measures, the documents `report` reads), compared by
//!   device and inode, whatever the spelling.
//! - Symbolic links are refused (pcieperf never writes through a link nor replaces one): name
//!   the file it points to.
//! - Writing goes to a temporary file with an unpredictable name in the same directory, flushed
//!   to disk, then renamed over the path: a reader sees the old file or the new one.
//! - When writing still fails at the end, the text is kept in a file in the temporary directory
//!   and the message names it.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::view::{render, Document, Format, ViewOptions};
use crate::bench::results::{Results, Stopped};
use crate::bounded::kind_name;
use crate::error::InvalidInput;

/// True for `-`, standard output.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// The directory a path's file lives in.
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// What a path names, compared by identity rather than spelling: an existing file by device
/// and inode, a new one by its canonical directory and name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    Stdout,
    Existing { dev: u64, ino: u64 },
    New(PathBuf),
}

fn identity(path: &Path) -> Option<Identity> {
    if is_stdout(path) {
        return Some(Identity::Stdout);
    }
    match std::fs::metadata(path) {
        Ok(meta) => Some(Identity::Existing { dev: meta.dev(), ino: meta.ino() }),
        Err(_) => Some(Identity::New(std::fs::canonicalize(directory_of(path)).ok()?.join(path.file_name()?))),
    }
}

/// An input's identity; `-` is standard input, which has one when it is a file (`< run.json`).
fn input_identity(path: &Path) -> Option<Identity> {
    if !is_stdout(path) {
        return identity(path);
    }
    // SAFETY: fstat fills a zeroed struct; fd 0 may be closed, which fstat reports.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(0, &mut stat) } == 0;
    (ok && stat.st_mode & libc::S_IFMT == libc::S_IFREG).then_some(Identity::Existing { dev: stat.st_dev, ino: stat.st_ino })
}

/// Check one output path (see the module's rules); `inputs` are the files the run reads (`-`:
/// standard input).
pub fn check(path: &Path, inputs: &[PathBuf]) -> Result<(), InvalidInput> {
    if is_stdout(path) {
        return Ok(());
    }
    let shown = path.display();
    if path.file_name().is_none() || path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(InvalidInput::new(format!("{shown} is not a file name (a trailing / names a directory)")));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_existing(path, &meta)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(InvalidInput::new(format!("cannot check {shown}: {e}"))),
    }
    let output = identity(path);
    if let Some(input) = inputs.iter().find(|input| output.is_some() && input_identity(input) == output) {
        let input = if is_stdout(input) { "standard input".to_string() } else { input.display().to_string() };
        return Err(InvalidInput::new(format!("{shown} is one of this run's inputs ({input}): refusing to overwrite it")));
    }
    let dir = directory_of(path);
    tempfile::Builder::new()
        .prefix(".pcieperf-probe")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| InvalidInput::new(format!("cannot write {shown}: cannot create a file in {}: {e}", dir.display())))
}

/// An existing output must be a writable regular file, not a link.
fn check_existing(path: &Path, meta: &std::fs::Metadata) -> Result<(), InvalidInput> {
    let shown = path.display();
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(InvalidInput::new(format!(
            "{shown} is a symbolic link: pcieperf never writes through or replaces a link; name the file it points to \
             (or - for standard output)"
        )));
    }
    if !kind.is_file() {
        return Err(InvalidInput::new(format!(
            "{shown} is {}: results go only to a regular file or a new path (or - for standard output)",
            kind_name(&kind)
        )));
    }
    if meta.permissions().readonly() || !access_writable(path) {
        return Err(InvalidInput::new(format!("{shown} is read-only: pcieperf does not replace files it may not write")));
    }
    Ok(())
}

/// Check every output of a run: each alone, no two naming the same file (however spelled), at
/// most one on stdout.
pub fn check_all(outputs: &[&Path], inputs: &[PathBuf]) -> Result<(), InvalidInput> {
    for path in outputs {
        check(path, inputs)?;
    }
    if outputs.iter().filter(|p| is_stdout(p)).count() > 1 {
        return Err(InvalidInput::new("only one output can go to standard output (-)"));
    }
    let named: Vec<(&Path, Option<Identity>)> = outputs.iter().filter(|p| !is_stdout(p)).map(|p| (*p, identity(p))).collect();
    for (i, (a, a_id)) in named.iter().enumerate() {
        if let Some((b, _)) = named[i + 1..].iter().find(|(b, b_id)| a == b || (a_id.is_some() && a_id == b_id)) {
            return Err(InvalidInput::new(format!("{} and {} are the same file, named for two outputs: give each output its own", a.display(), b.display())));
        }
    }
    Ok(())
}

/// Files named in a target (`block:FILE`, `chardev:W,R`, `fault:…:block:FILE,sync`): every
/// piece after a `:` or between `,` that exists on disk.
pub fn files_in_target(target: &str) -> Vec<PathBuf> {
    target
        .match_indices(':')
        .map(|(at, _)| &target[at + 1..])
        .flat_map(|rest| rest.split(','))
        .map(PathBuf::from)
        .filter(|path| std::fs::metadata(path).is_ok())
        .collect()
}

/// access(W_OK): the permission bits say writable, but not to us.
fn access_writable(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Write `text` to `path` (`-`: standard output), checking it again first (the path may have
/// changed since the run started), through a temporary file renamed over it.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    write_bytes(path, text.as_bytes())
}

/// [`write`] for binary outputs (a pcapng trace).
pub fn write_bytes(path: &Path, text: &[u8]) -> anyhow::Result<()> {
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        out.write_all(text)?;
        return Ok(out.flush()?);
    }
    check(path, &[])?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let written = (|| -> std::io::Result<()> {
        let mut temp = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(directory_of(path))?;
        temp.write_all(text)?;
        // tempfile creates 0600; a results file is as readable as any file the user makes.
        temp.as_file().set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        temp.as_file().sync_all()?;
        temp.persist(path).map(drop).map_err(|e| e.error)
    })();
    written.map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// [`write`], and when that fails keep the text in the temporary directory; the error message
/// names where it went.
pub fn write_or_keep(path: &Path, text: &str, what: &str) -> Result<(), String> {
    let error = match write(path, text) {
        Ok(()) => return Ok(()),
        Err(error) => format!("{error:#}"),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "pcieperf".into());
    let kept = (|| -> std::io::Result<PathBuf> {
        let mut file = tempfile::Builder::new().prefix(&format!("{name}.")).tempfile_in(std::env::temp_dir())?;
        file.write_all(text.as_bytes())?;
        file.as_file().sync_all()?;
        Ok(file.keep().map_err(|e| e.error)?.1)
    })();
    Err(match kept {
        Ok(fallback) => format!("{error}; the {what} was kept in {}", fallback.display()),
        Err(e) => format!("{error}; the {what} could not be kept in {} either: {e}", std::env::temp_dir().display()),
    })
}

/// `NAME.partial.json` beside `NAME.json` (or `NAME` without an extension).
pub fn partial_path(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_else(|| "json".into());
    path.with_file_name(format!("{stem}.partial.{ext}"))
}

/// The error and its causes on one line, leaving out a cause whose text an outer message already
/// quotes (an I/O error that is both shown and chained as the source).
pub fn describe(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain().map(|c| c.to_string()) {
        if line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    // Causes quote the user's input (a target, a path): shown escaped, on one line.
    crate::printable::one_line(&line)
}

/// The exit code of a command that failed: 130 when a signal was pending (it stopped the
/// command), 2 when the cause is the user's input, 1 otherwise.
pub fn exit_code_for(error: &anyhow::Error) -> i32 {
    if crate::cancel::requested() {
        return crate::cancel::EXIT_INTERRUPTED;
    }
    let bad_input = error.chain().any(|cause| {
        cause.downcast_ref::<InvalidInput>().is_some()
            || matches!(
                cause.downcast_ref::<crate::engine::EngineError>(),
                Some(crate::engine::EngineError::InvalidInput(_) | crate::engine::EngineError::UnknownTarget(..))
            )
    });
    if bad_input { 2 } else { 1 }
}

/// Where and how to show a finished run.
#[derive(Debug, Default)]
pub struct Outputs<'a> {
    pub json_stdout: bool,
    pub csv_stdout: bool,
    pub out: Option<&'a Path>,
    pub html: Option<&'a Path>,
    pub metrics: Option<&'a Path>,
    /// Lines printed before the summary (notes of `run`).
    pub notes: Vec<String>,
}

impl Outputs<'_> {
    /// The paths of the files asked for.
    pub fn paths(&self) -> Vec<&Path> {
        [self.out, self.html, self.metrics].into_iter().flatten().collect()
    }

    /// Refuse, before anything is measured, outputs that would destroy something (see the
    /// module's rules); `target`'s files are the run's inputs.
    pub fn check(&self, target: &str) -> Result<(), InvalidInput> {
        if (self.json_stdout || self.csv_stdout) && self.paths().iter().any(|p| is_stdout(p)) {
            return Err(InvalidInput::new("--json and --csv already print on standard output: give the other output a file"));
        }
        check_all(&self.paths(), &files_in_target(target))
    }
}

/// Where the results document goes: `path`, except that an interrupted run never replaces an
/// earlier complete document; it goes to `NAME.partial.json` beside it.
fn results_path(path: &Path, results: &Results) -> PathBuf {
    let replaces_complete = !is_stdout(path) && super::json::read(path).is_ok_and(|earlier| earlier.complete);
    if !results.complete && replaces_complete {
        partial_path(path)
    } else {
        path.to_path_buf()
    }
}

/// Write every requested view of a finished run, print the summary, and choose the exit code:
/// 130 after a signal, 1 after an engine error, a verification failure or an output that could
/// not be written (the summary is printed anyway and the document kept where the message says),
/// else 0. The results file is written before anything else so nothing measured is lost.
pub fn emit(results: Results, outputs: &Outputs) -> anyhow::Result<i32> {
    let document = Document::Results(results);
    let Some(results) = document.as_results() else { anyhow::bail!("a measuring run ends with a results document") };
    let options = ViewOptions::default();
    let mut failures = Vec::new();
    let mut results_file = None;
    if let Some(path) = outputs.out {
        let path = results_path(path, results);
        let written = render(&document, Format::Json, &options).map_err(|e| e.0).and_then(|text| write_or_keep(&path, &text, "results document"));
        match written {
            Ok(()) => results_file = Some(path),
            Err(message) => failures.push(message),
        }
    }
    for (path, what, format) in [(outputs.html, "HTML report", Format::Html), (outputs.metrics, "metrics", Format::Metrics)] {
        let Some(path) = path else { continue };
        if let Err(message) = render(&document, format, &options).map_err(|e| e.0).and_then(|text| write_or_keep(path, &text, what)) {
            failures.push(message);
        }
    }
    let summary = match (outputs.json_stdout, outputs.csv_stdout) {
        (true, _) => render(&document, Format::Json, &options)?,
        (false, true) => render(&document, Format::Csv, &options)?,
        _ => outputs.notes.iter().map(|note| format!("note: {note}\n")).collect::<String>() + &render(&document, Format::Text, &options)?,
    };
    // A document on standard output (`-`) takes it: the summary goes to standard error.
    if outputs.paths().iter().any(|p| is_stdout(p)) {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    report_end(results, results_file.filter(|p| !is_stdout(p)).as_deref(), &failures);
    let code = results.exit_code();
    Ok(if code == 0 && !failures.is_empty() { 1 } else { code })
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--quiet`: from now on only results and errors are printed.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

static WIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--wide`: tables show every column, whatever the terminal's width.
pub fn set_wide(wide: bool) {
    WIDE.store(wide, std::sync::atomic::Ordering::Relaxed);
}

/// Characters a wide table may take on standard output: the terminal's width (its `COLUMNS`,
/// else the window size, else 100) when standard output is a terminal and `--wide` was not
/// given; `None` (every column) when it is a pipe or a file, as lspci and ripgrep do.
pub fn table_width() -> Option<usize> {
    // SAFETY: isatty only inspects the descriptor.
    if WIDE.load(std::sync::atomic::Ordering::Relaxed) || unsafe { libc::isatty(1) } != 1 {
        return None;
    }
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok());
    Some(columns.or_else(window_columns).unwrap_or(100).max(40))
}

fn window_columns() -> Option<usize> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we pass.
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// "`what` written to `path`" on standard error, unless `--quiet` or the path is standard
/// output.
pub fn written(what: &str, path: &Path) {
    if !quiet() && !is_stdout(path) {
        eprintln!("{what} written to {}", path.display());
    }
}

/// The lines after a run's summary: where its results went, what could not be written, and
/// why it stopped early or failed verification.
fn report_end(results: &Results, shown: Option<&Path>, failures: &[String]) {
    if let Some(path) = shown {
        written(&format!("results ({})", results.label()), path);
    }
    for failure in failures {
        eprintln!("pcieperf: {failure}");
    }
    let kept = shown.map_or(String::new(), |p| format!("; partial results kept in {}", p.display()));
    match &results.stopped {
        Some(Stopped::Interrupted) => eprintln!("pcieperf: interrupted{kept}"),
        Some(Stopped::Error { message }) => eprintln!("pcieperf: {message}{kept}"),
        None => {
            if let Some(failure) = &results.verification.first_failure {
                eprintln!("pcieperf: data verification failed: {failure}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_paths_and_writable_files_pass_and_the_rest_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.json");
        check(&new, &[]).unwrap();
        std::fs::write(&new, "old").unwrap();
        check(&new, &[]).unwrap();
        let err = check(&new, &[dir.path().join("./new.json")]).unwrap_err().0;
        assert!(err.contains("inputs"), "{err}");
        let err = check(dir.path(), &[]).unwrap_err().0;
        assert!(err.contains("a directory"), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&new, &link).unwrap();
        assert!(check(&link, &[]).unwrap_err().0.contains("symbolic link"));
        check(Path::new("-"), &[]).unwrap();
        assert!(check_all(&[Path::new("-"), Path::new("-")], &[]).is_err());
        assert!(check_all(&[&new, &dir.path().join("new.json")], &[]).unwrap_err().0.contains("two outputs"));
        let (fresh, spelled) = (dir.path().join("fresh.json"), dir.path().join(".").join("fresh.json"));
        assert!(check_all(&[&fresh, &spelled], &[]).unwrap_err().0.contains("two outputs"), "new files compared by identity");
        let slash = PathBuf::from(format!("{}/", fresh.display()));
        assert!(check(&slash, &[]).unwrap_err().0.contains("trailing /"));
    }

    #[test]
    fn partial_names_sit_beside_the_complete_file() {
        assert_eq!(partial_path(Path::new("d/run.json")), PathBuf::from("d/run.partial.json"));
        assert_eq!(partial_path(Path::new("run")), PathBuf::from("run.partial.json"));
    }

    #[test]
    fn targets_name_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk");
        std::fs::write(&file, "x").unwrap();
        let target = format!("fault:drop:block:{},sync", file.display());
        assert_eq!(files_in_target(&target), vec![file]);
        assert!(files_in_target("sim:doc001").is_empty());
    }
}
