//! The guest's initramfs, built from what the Debian packages installed: busybox (static), the
//! kernel's modules, lspci with pci.ids, and the pcieperf binary under test, each dynamic
//! executable with the shared libraries `ldd` names. Nothing is downloaded.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Drivers the guest loads, with their dependencies in the order modules.dep gives.
const MODULES: &[&str] = &[
    "crc64_rocksoft_generic",
    "crct10dif_generic",
    "nvme",
    "e1000e",
    "virtio_pci",
    "virtio_console",
    "virtio_net",
    "uio_pci_generic",
    "vfio-pci",
    // vfio's soft dependency (busybox modprobe ignores softdeps): VFIO_SET_IOMMU needs it.
    "vfio_iommu_type1",
];

/// Module parameters. QEMU 7.2's NVMe controller under TCG occasionally never completes an
/// I/O; the driver's default 30 s I/O timeout (then abort, then reset) outlasts a test's
/// transfer deadline, so the guest gives up on such an I/O after 2 s (abort, then reset: ~5 s in all) and resets sooner.
const MODULE_PARAMS: &[(&str, &str)] = &[("nvme_core", "io_timeout=2")];

/// A bootable kernel and an initramfs for it.
#[derive(Debug, Clone)]
pub struct Image {
    pub kernel: PathBuf,
    pub kernel_version: String,
    pub initramfs: PathBuf,
}

/// Why the testbed cannot run on this machine, or `None` when it can.
pub fn missing_tools() -> Option<String> {
    let mut missing = Vec::new();
    for tool in ["qemu-system-x86_64", "busybox", "lspci", "cpio"] {
        if which(tool).is_none() {
            missing.push(tool.to_string());
        }
    }
    if let Err(e) = kernel() {
        missing.push(e);
    }
    if pci_ids().is_none() {
        missing.push("pci.ids".into());
    }
    (!missing.is_empty()).then(|| {
        format!(
            "the QEMU testbed needs {} (Debian packages qemu-system-x86, linux-image-amd64, busybox-static, pciutils, pci.ids, cpio; .ci/run installs them)",
            missing.join(", ")
        )
    })
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

fn pci_ids() -> Option<PathBuf> {
    ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"].iter().map(PathBuf::from).find(|p| p.is_file())
}

/// The newest `/boot/vmlinuz-*` with its `/lib/modules/<version>`.
fn kernel() -> Result<(PathBuf, String), String> {
    let mut kernels: Vec<(PathBuf, String)> = fs::read_dir("/boot")
        .map_err(|_| "/boot is not readable".to_string())?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("vmlinuz-")?.to_string();
            Path::new("/lib/modules").join(&version).join("modules.dep").is_file().then(|| (e.path(), version))
        })
        .collect();
    kernels.sort();
    kernels.pop().ok_or_else(|| "a kernel (/boot/vmlinuz-* with /lib/modules/<version>/modules.dep)".to_string())
}

/// Build once per process; reuse a file from an earlier run when the binary is unchanged.
pub fn cached(pcieperf: &Path, cache_dir: &Path) -> Result<Image, String> {
    static IMAGE: OnceLock<Result<Image, String>> = OnceLock::new();
    IMAGE.get_or_init(|| build(pcieperf, cache_dir)).clone()
}

fn build(pcieperf: &Path, cache_dir: &Path) -> Result<Image, String> {
    if let Some(why) = missing_tools() {
        return Err(why);
    }
    let (kernel, version) = kernel()?;
    let meta = fs::metadata(pcieperf).map_err(|e| format!("{}: {e}", pcieperf.display()))?;
    let stamp = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    fs::create_dir_all(cache_dir).map_err(|e| format!("{}: {e}", cache_dir.display()))?;
    let recipe = {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (INIT, MODULES, MODULE_PARAMS).hash(&mut hasher);
        hasher.finish()
    };
    let initramfs = cache_dir.join(format!("initramfs-{version}-{:x}-{stamp:x}-{recipe:x}.cpio", meta.len()));
    if !initramfs.is_file() {
        // Images of older binaries are stale: keep the cache to one.
        for old in fs::read_dir(cache_dir).map_err(|e| e.to_string())?.flatten() {
            if old.file_name().to_string_lossy().starts_with("initramfs-") {
                let _ = fs::remove_file(old.path());
            }
        }
        let staging = tempfile::tempdir_in(cache_dir).map_err(|e| e.to_string())?;
        stage(staging.path(), pcieperf, &version)?;
        let partial = initramfs.with_extension("partial");
        pack(staging.path(), &partial)?;
        fs::rename(&partial, &initramfs).map_err(|e| e.to_string())?;
    }
    Ok(Image { kernel, kernel_version: version, initramfs })
}

fn copy(from: &Path, root: &Path, to: &str) -> Result<(), String> {
    let dest = root.join(to.trim_start_matches('/'));
    fs::create_dir_all(dest.parent().unwrap()).map_err(|e| e.to_string())?;
    fs::copy(from, &dest).map_err(|e| format!("copy {} into the initramfs: {e}", from.display()))?;
    Ok(())
}

/// Shared libraries of a dynamic executable, as `ldd` lists them (none for a static one).
fn libraries(executable: &Path) -> Vec<PathBuf> {
    let Ok(out) = Command::new("ldd").arg(executable).output() else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// Module files in load order: each module's dependencies (modules.dep lists them nearest
/// first, so they load in reverse), then the module.
pub fn module_load_order(modules_dep: &str, wanted: &[&str]) -> Vec<String> {
    let stem = |path: &str| Path::new(path).file_stem().unwrap().to_string_lossy().replace('-', "_");
    let deps: Vec<(String, String, Vec<String>)> = modules_dep
        .lines()
        .filter_map(|line| {
            let (module, deps) = line.split_once(':')?;
            Some((stem(module), module.to_string(), deps.split_whitespace().map(str::to_string).collect()))
        })
        .collect();
    let mut order: Vec<String> = Vec::new();
    for want in wanted {
        let want = want.replace('-', "_");
        let Some((_, path, needs)) = deps.iter().find(|(s, _, _)| *s == want) else { continue };
        for file in needs.iter().rev().chain(std::iter::once(path)) {
            if !order.contains(file) {
                order.push(file.clone());
            }
        }
    }
    order
}

fn stage(root: &Path, pcieperf: &Path, version: &str) -> Result<(), String> {
    let busybox = which("busybox").unwrap();
    let lspci = which("lspci").unwrap();
    let mut libs = BTreeSet::new();
    for (exe, to) in [(&busybox, "/bin/busybox"), (&lspci, "/bin/lspci"), (&pcieperf.to_path_buf(), "/bin/pcieperf")] {
        copy(exe, root, to)?;
        libs.extend(libraries(exe));
    }
    for lib in libs {
        let real = fs::canonicalize(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
        copy(&real, root, lib.to_str().unwrap())?;
    }
    copy(&pci_ids().unwrap(), root, "/usr/share/misc/pci.ids")?;
    let modules = Path::new("/lib/modules").join(version);
    let dep = fs::read_to_string(modules.join("modules.dep")).map_err(|e| e.to_string())?;
    let mut load = String::new();
    for file in module_load_order(&dep, MODULES) {
        let name = Path::new(&file).file_name().unwrap().to_string_lossy().into_owned();
        copy(&modules.join(&file), root, &format!("/lib/modules/{name}"))?;
        let stem = name.split('.').next().unwrap_or_default().replace('-', "_");
        let params = MODULE_PARAMS.iter().find(|(module, _)| *module == stem).map_or("", |(_, params)| params);
        load += &format!("{name} {params}\n");
    }
    let write = |path: &str, text: &str, mode: u32| -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let dest = root.join(path);
        fs::create_dir_all(dest.parent().unwrap()).map_err(|e| e.to_string())?;
        fs::write(&dest, text).map_err(|e| e.to_string())?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())
    };
    write("etc/modules", &load, 0o644)?;
    write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\ntester:x:1000:1000:unprivileged tester:/tmp:/bin/sh\n", 0o644)?;
    write("etc/group", "root:x:0:\ntester:x:1000:\n", 0o644)?;
    write("init", INIT, 0o755)?;
    Ok(())
}

/// The guest's PID 1: mount, load drivers, then serve commands on the `pcieperf.cmd`
/// virtio-serial port. A request is one line `ID SCRIPT`; the answer is a header
/// `@@@ ID EXIT STDOUT_BYTES STDERR_BYTES` and then both outputs, byte for byte.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /tmp /root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
chmod 1777 /tmp
while read -r module params; do insmod "/lib/modules/$module" $params 2>>/tmp/insmod.log || echo "insmod $module failed" >>/tmp/insmod.log; done </etc/modules
port=""
for i in $(seq 1 100); do
  for name in /sys/class/virtio-ports/*/name; do
    [ "$(cat "$name" 2>/dev/null)" = pcieperf.cmd ] && port=/dev/$(basename "$(dirname "$name")")
  done
  [ -n "$port" ] && [ -e "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "testbed: no pcieperf.cmd port"; poweroff -f; }
exec 3<>"$port"
echo "@@@ READY" >&3
while :; do
  if ! read -r id script <&3; then sleep 0.1; continue; fi
  printf '%s\n' "$script" >/tmp/.cmd
  (cd /tmp && sh /tmp/.cmd) >/tmp/.out 2>/tmp/.err </dev/null
  rc=$?
  echo "@@@ $id $rc $(wc -c </tmp/.out) $(wc -c </tmp/.err)" >&3
  cat /tmp/.out /tmp/.err >&3
done
"#;

fn pack(staging: &Path, out: &Path) -> Result<(), String> {
    let files = Command::new("find").arg(".").current_dir(staging).output().map_err(|e| e.to_string())?;
    let mut cpio = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet", "-O"])
        .arg(out)
        .current_dir(staging)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cpio: {e}"))?;
    cpio.stdin.take().unwrap().write_all(&files.stdout).map_err(|e| e.to_string())?;
    let status = cpio.wait().map_err(|e| e.to_string())?;
    status.success().then_some(()).ok_or_else(|| format!("cpio failed: {status}"))
}
