# Kbuild's saved commands, for the kernel scripts: every built file's
# .<name>.cmd holds "savedcmd_<name> := <the commands that made it>".

# saved_parts CMDFILE: CMDFILE's saved command, one part a line (Kbuild
# joins a recipe's commands with ";"), leading blanks removed.
saved_parts() {
  sed -n 's/^savedcmd_[^ ]* := //p' "$1" | tr ';' '\n' | sed 's/^ *//'
}
