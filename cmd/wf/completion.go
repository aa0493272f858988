package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// CompletionCommand prints a shell completion script.
type CompletionCommand struct {
	cli *CLI
}

// Run implements `wf completion bash|zsh|fish`.
func (cmd *CompletionCommand) Run(_ context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("completion", "wf completion bash|zsh|fish",
		"Print a script that completes wf's commands, subcommands and flags in\nyour shell. Load it from your shell's startup file:\n\n  bash:  source <(wf completion bash)        (in ~/.bashrc)\n  zsh:   source <(wf completion zsh)         (in ~/.zshrc)\n  fish:  wf completion fish | source         (in ~/.config/fish/config.fish)")
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageErr(fs, "wf completion needs one shell: bash, zsh or fish")
	}
	switch positional[0] {
	case "bash":
		writeBashCompletion(c.Stdout, false)
	case "zsh":
		writeBashCompletion(c.Stdout, true)
	case "fish":
		writeFishCompletion(c.Stdout)
	default:
		return usageErr(fs, "unknown shell %q: want bash, zsh or fish", positional[0])
	}
	return nil
}

// completionWords are the words to complete after each command (and
// after "state SUB"): its subcommands or its flags.
func completionWords() (names []string, flags map[string][]string) {
	flags = map[string][]string{}
	for _, ci := range commands() {
		names = append(names, ci.name)
		switch ci.name {
		case "help":
			continue
		case "completion":
			flags[ci.name] = []string{"bash", "zsh", "fish"}
			continue
		}
		flags[ci.name] = dashed(commandFlags(ci.name))
	}
	for _, sub := range stateSubcommands {
		flags["state "+sub] = dashed(commandFlags("state", sub))
	}
	return names, flags
}

func dashed(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "-" + f
	}
	return out
}

// writeBashCompletion prints the bash script; with zsh, wrapped for zsh's
// bash completion emulation (bashcompinit).
func writeBashCompletion(w io.Writer, zsh bool) {
	names, flags := completionWords()
	if zsh {
		fmt.Fprintln(w, "#compdef wf\n# wf completion for zsh (through bashcompinit).\nautoload -U +X bashcompinit && bashcompinit")
	} else {
		fmt.Fprintln(w, "# wf completion for bash.")
	}
	fmt.Fprintf(w, `_wf() {
  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" sub="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    case "$w" in
      -*) ;;
      *) if [[ -z "$cmd" ]]; then cmd="$w"; elif [[ "$cmd" == state && -z "$sub" ]]; then sub="$w"; fi ;;
    esac
  done
  local words=""
  case "$cmd" in
    "") words="%s -chdir=" ;;
    help) words="%s" ;;
    state)
      if [[ -z "$sub" ]]; then words="%s"; fi
      case "$sub" in
`, strings.Join(names, " "), strings.Join(names, " "), strings.Join(stateSubcommands, " "))
	for _, sub := range stateSubcommands {
		fmt.Fprintf(w, "        %s) words=%q ;;\n", sub, strings.Join(flags["state "+sub], " "))
	}
	fmt.Fprintln(w, "      esac ;;")
	for _, n := range names {
		if f, ok := flags[n]; ok && n != "state" {
			fmt.Fprintf(w, "    %s) words=%q ;;\n", n, strings.Join(f, " "))
		}
	}
	fmt.Fprint(w, `  esac
  if [[ "$cur" == -* || -z "$cmd" || "$cmd" == help || "$cmd" == completion || ( "$cmd" == state && -z "$sub" ) ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _wf wf
`)
}

// writeFishCompletion prints the fish script.
func writeFishCompletion(w io.Writer) {
	_, flags := completionWords()
	fmt.Fprintln(w, "# wf completion for fish.\ncomplete -c wf -f")
	for _, ci := range commands() {
		fmt.Fprintf(w, "complete -c wf -n __fish_use_subcommand -a %s -d %s\n", ci.name, fishQuote(ci.summary))
	}
	fmt.Fprintln(w, "complete -c wf -n __fish_use_subcommand -o chdir -r -d 'Switch to DIR before running the command'")
	for _, ci := range commands() {
		switch ci.name {
		case "help":
			for _, n := range commands() {
				fmt.Fprintf(w, "complete -c wf -n '__fish_seen_subcommand_from help' -a %s\n", n.name)
			}
			continue
		case "completion":
			fmt.Fprintln(w, "complete -c wf -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'")
			continue
		case "state":
			for _, sub := range stateSubcommands {
				fmt.Fprintf(w, "complete -c wf -n '__fish_seen_subcommand_from state; and not __fish_seen_subcommand_from %s' -a %s\n", strings.Join(stateSubcommands, " "), sub)
				for _, f := range flags["state "+sub] {
					fmt.Fprintf(w, "complete -c wf -n '__fish_seen_subcommand_from state; and __fish_seen_subcommand_from %s' -o %s\n", sub, strings.TrimPrefix(f, "-"))
				}
			}
			continue
		}
		for _, f := range flags[ci.name] {
			fmt.Fprintf(w, "complete -c wf -n '__fish_seen_subcommand_from %s' -o %s\n", ci.name, strings.TrimPrefix(f, "-"))
		}
		fmt.Fprintf(w, "complete -c wf -n '__fish_seen_subcommand_from %s' -F\n", ci.name)
	}
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
