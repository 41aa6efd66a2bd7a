package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/thindist/thindist/internal/config"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/source/linkflags"
)

const configIntro = `Usage:
  thindist config [flags]

Prints every setting in effect, thindist link's own too, and where it came
from: its default, a config file, an environment variable, or a flag given here (flags given to 'thindist
config' show their effect, as they would on a link). Header values are not
shown: they usually carry credentials.

Precedence, lowest first: default, the default config file
($XDG_CONFIG_HOME/thindist/config, else ~/.config/thindist/config), the file of
--config, the environment (THINDIST_*), the command line.
`

func configUsage(w io.Writer) { io.WriteString(w, configIntro+settingsPointer) }

// configCmd runs `thindist config [flags]`.
func configCmd(args []string, env pipeline.Env, stdout io.Writer) int {
	if wantsHelp(args) {
		configUsage(stdout)
		return 0
	}
	var cfg config.Config
	fs := newFlags(&cfg)
	// thindist link's own settings too: they are set the same ways.
	linkflags.Register(fs, new(linkflags.Flags))
	if code := parseFlags("thindist config", fs, &cfg, args, env, configUsage); code >= 0 {
		return code
	}
	if rest := fs.Args(); len(rest) > 0 {
		fmt.Fprintf(env.Stderr, "thindist config: unexpected arguments %q\n", rest)
		return 2
	}
	def := config.DefaultConfigFile(env.Getenv)
	state := "absent"
	if _, err := os.Stat(def); err == nil {
		state = "read"
	}
	fmt.Fprintf(stdout, "# default config file: %s (%s)\n", def, state)
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	for _, s := range fs.Settings() {
		v := s.Value
		switch {
		case s.Name == "cache-dir" && v == "":
			v = config.DefaultCacheDir(env.Getenv)
		case s.DefaultText != "" && s.Name != "cache-dir":
			v += " (" + meaning(s.DefaultText, fs) + ")"
		}
		fmt.Fprintf(tw, "%s = %s\t# %s\n", s.Name, v, s.Source)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(env.Stderr, "thindist config: %v\n", err)
		return 1
	}
	return 0
}

// meaning spells out a default's placeholder: "--jobs" as "the value of
// --jobs: 8".
func meaning(text string, fs *config.FlagSet) string {
	if name, ok := strings.CutPrefix(text, "--"); ok {
		for _, s := range fs.Settings() {
			if s.Name == name {
				return "the value of --" + name + ": " + s.Value
			}
		}
	}
	return text
}

// wantsHelp reports whether a subcommand's first argument asks for its help.
func wantsHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h")
}
