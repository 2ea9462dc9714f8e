#!/usr/bin/env python3
"""Writes trawl's Debian package with dpkg-deb, from the same metadata cargo-deb reads.

    scripts/deb-pack.py BINARY OUT_DIR

What cargo-deb does for `[package.metadata.deb]` of crates/cli/Cargo.toml, and nothing more:
the assets (man pages gzipped), the systemd unit with the maintainer-script snippets cargo-deb
adds for `enable = false, start = false`, the maintainer scripts with `#DEBHELPER#` replaced,
conffiles (the listed ones and every file under /etc, as cargo-deb), `Depends` with `$auto`
from dpkg-shlibdeps, a copyright file, md5sums. The binary is stripped on the way.

Why it exists: cargo-deb is not on a fresh CI machine, and installing it from crates.io costs
minutes of compiling; this needs only Python's standard library and dpkg-dev. scripts/test.sh
packages the suite's dev binary with it (scripts/deb.sh --dev); release packages are still
built with `cargo deb` (scripts/deb.sh). docs/deploy.md says how the two were compared.
"""
import glob
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATE = os.path.join(ROOT, "crates", "cli")
# The asset source cargo-deb replaces with the binary it built: here, the one given.
BINARY_ASSET = "target/release/trawl"

# cargo-deb's snippets for a unit with `enable = false, start = false` (cargo-deb 2.x: the
# same text debhelper's dh_installsystemd writes), by maintainer script.
SYSTEMD_SNIPPETS = {
    "postinst": """\
# Automatically added by cargo-deb
if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ] ; then
	if deb-systemd-helper debian-installed {unit}; then
		# This will only remove masks created by d-s-h on package removal.
		deb-systemd-helper unmask {unit} >/dev/null || true

		if deb-systemd-helper --quiet was-enabled {unit}; then
			# Create new symlinks, if any.
			deb-systemd-helper enable {unit} >/dev/null || true
		fi
	fi

	# Update the statefile to add new symlinks (if any), which need to be cleaned
	# up on purge. Also remove old symlinks.
	deb-systemd-helper update-state {unit} >/dev/null || true
fi
# End automatically added section
# Automatically added by cargo-deb
if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ] ; then
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then
			deb-systemd-invoke try-restart {unit} >/dev/null || true
		fi
	fi
fi
# End automatically added section
""",
    "postrm": """\
# Automatically added by cargo-deb
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
# End automatically added section
# Automatically added by cargo-deb
if [ "$1" = "remove" ]; then
	if [ -x "/usr/bin/deb-systemd-helper" ]; then
		deb-systemd-helper mask {unit} >/dev/null || true
	fi
fi

if [ "$1" = "purge" ]; then
	if [ -x "/usr/bin/deb-systemd-helper" ]; then
		deb-systemd-helper purge {unit} >/dev/null || true
		deb-systemd-helper unmask {unit} >/dev/null || true
	fi
fi
# End automatically added section
""",
    "prerm": """\
# Automatically added by cargo-deb
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
	deb-systemd-invoke stop {unit} >/dev/null || true
fi
# End automatically added section
""",
}


def fail(msg):
    sys.exit(f"deb-pack: {msg}")


def metadata():
    """The crate's package table (workspace-inherited keys resolved) and its deb table."""
    with open(os.path.join(CRATE, "Cargo.toml"), "rb") as f:
        crate = tomllib.load(f)
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        workspace = tomllib.load(f)["workspace"].get("package", {})
    package = crate["package"]
    for key, value in list(package.items()):
        if isinstance(value, dict) and value.get("workspace"):
            package[key] = workspace[key]
    return package, package["metadata"]["deb"]


def place(src, dest_rel, mode, tree):
    """Copies one asset into the tree; man pages are gzipped, as cargo-deb does."""
    dest = os.path.join(tree, dest_rel)
    if dest_rel.endswith("/"):
        dest = os.path.join(dest, os.path.basename(src))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if "/share/man/" in dest and not dest.endswith(".gz"):
        dest += ".gz"
        with open(src, "rb") as i, gzip.GzipFile(dest, "wb", 9, mtime=0) as o:
            shutil.copyfileobj(i, o)
    else:
        shutil.copyfile(src, dest)
    os.chmod(dest, int(mode, 8))
    return dest


def assets(deb, binary, tree):
    """Every asset in place; returns the packaged binary's path."""
    packaged = None
    for src, dest, mode in deb["assets"]:
        if src == BINARY_ASSET:
            packaged = place(binary, dest.lstrip("/"), mode, tree)
            # What cargo-deb does unless told --no-strip: debug info off the package.
            subprocess.run(["strip", "--strip-unneeded", packaged], check=True)
            continue
        sources = sorted(glob.glob(os.path.join(CRATE, src)))
        if not sources:
            fail(f"asset {src} (relative to crates/cli) matches no file")
        for s in sources:
            place(s, dest.lstrip("/"), mode, tree)
    if packaged is None:
        fail(f"no asset {BINARY_ASSET}: which file is the binary?")
    return packaged


def systemd_unit(deb, tree):
    """Installs the unit; returns its name (for the snippets), or None."""
    units = deb.get("systemd-units")
    if not units:
        return None
    if units.get("enable", True) or units.get("start", True):
        fail("only enable = false, start = false units are written (the snippets differ)")
    name = units["unit-name"] + ".service"
    src = os.path.join(CRATE, units["unit-scripts"], name)
    place(src, "usr/lib/systemd/system/", "644", tree)
    return name


def depends(deb, binary):
    """`Depends`, `$auto` replaced by what dpkg-shlibdeps finds the binary needs."""
    parts = [d.strip() for d in deb.get("depends", "$auto").split(",")]
    if "$auto" in parts:
        with tempfile.TemporaryDirectory() as d:
            # dpkg-shlibdeps insists on a debian/control; an empty one does.
            os.mkdir(os.path.join(d, "debian"))
            open(os.path.join(d, "debian", "control"), "w").close()
            out = subprocess.run(["dpkg-shlibdeps", "-O", binary], cwd=d, check=True,
                                 capture_output=True, text=True).stdout
        auto = [line.split("=", 1)[1] for line in out.splitlines()
                if line.startswith("shlibs:Depends=")]
        parts.remove("$auto")
        parts += [p.strip() for a in auto for p in a.split(",")]
    return ", ".join(sorted(set(parts)))


def control_text(package, deb, tree, binary):
    size_kib = sum(os.path.getsize(os.path.join(dp, f))
                   for dp, _, fs in os.walk(tree) for f in fs) // 1024
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()
    extended = textwrap.wrap(" ".join(deb.get("extended-description", "").split()), 79)
    fields = [
        ("Package", deb.get("name", package["name"])),
        ("Version", f"{package['version']}-{deb.get('revision', '1')}"),
        ("Architecture", arch),
        ("Section", deb.get("section")),
        ("Priority", deb.get("priority")),
        ("Maintainer", deb.get("maintainer")),
        ("Installed-Size", str(size_kib)),
        ("Depends", depends(deb, binary)),
        ("Description", package["description"] + "".join("\n " + l for l in extended)),
    ]
    return "".join(f"{k}: {v}\n" for k, v in fields if v)


def maintainer_scripts(deb, unit, control):
    scripts_dir = os.path.join(CRATE, deb.get("maintainer-scripts", ""))
    for name in ("preinst", "postinst", "prerm", "postrm"):
        path = os.path.join(scripts_dir, name)
        snippet = SYSTEMD_SNIPPETS.get(name, "").format(unit=unit) if unit else ""
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            text = text.replace("#DEBHELPER#\n", snippet) if "#DEBHELPER#" in text else text
        elif snippet:
            text = "#!/bin/sh\nset -e\n" + snippet
        else:
            continue
        with open(os.path.join(control, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(control, name), 0o755)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/deb-pack.py BINARY OUT_DIR")
    binary, out_dir = sys.argv[1], sys.argv[2]
    package, deb = metadata()
    with tempfile.TemporaryDirectory(prefix="trawl-deb-") as tree:
        # The package's `./`: a temporary directory is 0700, the root of a system is not.
        os.chmod(tree, 0o755)
        packaged = assets(deb, binary, tree)
        unit = systemd_unit(deb, tree)
        doc = os.path.join(tree, "usr/share/doc", deb.get("name", package["name"]))
        os.makedirs(doc, exist_ok=True)
        with open(os.path.join(doc, "copyright"), "w") as f:
            f.write("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
                    f"Upstream-Name: {package['name']}\n"
                    f"Copyright: {deb.get('copyright', '')}\n"
                    f"License: {package['license']}\n")
        files = sorted(os.path.relpath(os.path.join(dp, f), tree)
                       for dp, _, fs in os.walk(tree) for f in fs)
        control = os.path.join(tree, "DEBIAN")
        os.mkdir(control)
        with open(os.path.join(control, "control"), "w") as f:
            f.write(control_text(package, deb, tree, packaged))
        conffiles = list(deb.get("conf-files", []))
        conffiles += ["/" + p for p in files if p.startswith("etc/") and "/" + p not in conffiles]
        with open(os.path.join(control, "conffiles"), "w") as f:
            f.write("".join(c + "\n" for c in conffiles))
        with open(os.path.join(control, "md5sums"), "w") as f:
            for p in files:
                with open(os.path.join(tree, p), "rb") as b:
                    f.write(f"{hashlib.md5(b.read()).hexdigest()}  {p}\n")
        maintainer_scripts(deb, unit, control)
        os.makedirs(out_dir, exist_ok=True)
        version = f"{package['version']}-{deb.get('revision', '1')}"
        arch = subprocess.run(["dpkg", "--print-architecture"], check=True,
                              capture_output=True, text=True).stdout.strip()
        out = os.path.join(out_dir, f"{deb.get('name', package['name'])}_{version}_{arch}.deb")
        # Uncompressed: the package is checked and thrown away; compression time is CI time.
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Znone", "--build", tree, out],
                       check=True, stdout=subprocess.DEVNULL)
    print(out)


if __name__ == "__main__":
    main()
