//! `trawl completions SHELL` and `trawl man [DIR]`: shell completions and man pages generated
//! from the clap definitions, so they list exactly the commands and flags the binary takes
//! (`main` passes the definition in: this module is below `args`, which names its flags).
use std::path::PathBuf;
use std::process::ExitCode;

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write trawl.1 and trawl-COMMAND.1 for every command into this directory (created if
    /// needed); without it, trawl(1) goes to standard output.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `trawl completions SHELL`: the completion script on standard output.
pub fn completions(a: &CompletionsArgs, mut cmd: clap::Command) -> Result<ExitCode> {
    let mut text = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "trawl", &mut text);
    print(&text, "the completion script")
}

/// `trawl man [DIR]`.
pub fn man(a: &ManArgs, cmd: clap::Command) -> Result<ExitCode> {
    match &a.dir {
        None => {
            let mut text = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut text)
                .context("cannot render the man page")?;
            return print(&text, "the man page");
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to standard output; a closed pipe (`trawl man | head`) is not an error.
fn print(text: &[u8], what: &str) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).with_context(|| format!("cannot write {what}"))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
