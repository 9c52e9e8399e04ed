package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// ANSI colours of terminal output.
const (
	colorReset  = "\x1b[0m"
	colorBold   = "\x1b[1m"
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorCyan   = "\x1b[36m"
)

// stdoutTerminal reports whether standard output is a terminal.
func (a *app) stdoutTerminal() bool {
	f, ok := a.env.Stdout.(*os.File)
	return ok && isTerminal(f)
}

// colorOn reports whether to colour output: on a terminal, unless NO_COLOR is
// set or the terminal is dumb (https://no-color.org).
func (a *app) colorOn() bool {
	return !a.json && a.stdoutTerminal() && a.env.Getenv("NO_COLOR") == "" && a.env.Getenv("TERM") != "dumb"
}

// paged runs print with standard output going through a pager when it is a
// terminal: $PAGER, else less, run with LESS=FRX unless LESS is set (so
// output shorter than a screen is simply printed, colours kept). --no-pager,
// --json or PAGER=cat print directly. print is told whether to colour.
func (a *app) paged(show func(color bool) error) error {
	color := a.colorOn()
	pager := a.env.Getenv("PAGER")
	if pager == "" {
		if _, err := exec.LookPath("less"); err == nil {
			pager = "less"
		}
	}
	if a.noPager || a.json || pager == "" || strings.TrimSpace(pager) == "cat" || !a.stdoutTerminal() {
		return show(color)
	}
	cmd := exec.Command("sh", "-c", pager)
	cmd.Stdout, cmd.Stderr = a.env.Stdout, a.env.Stderr
	cmd.Env = os.Environ()
	if a.env.Getenv("LESS") == "" {
		cmd.Env = append(cmd.Env, "LESS=FRX")
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return show(color)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(a.env.Stderr, "belay: cannot run the pager %q (%v); set PAGER or pass --no-pager\n", pager, err)
		return show(color)
	}
	stdout := a.env.Stdout
	a.env.Stdout = in
	err = show(color)
	a.env.Stdout = stdout
	in.Close()
	cmd.Wait()
	// Quitting the pager early (q in less) is no error of the command.
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// paint wraps s in a colour when color is set.
func paint(color bool, code, s string) string {
	if !color || s == "" {
		return s
	}
	return code + s + colorReset
}

// colorPatch colours a unified diff as git does.
func colorPatch(w io.Writer, patch string) {
	for line := range strings.Lines(patch) {
		text := strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(text, "diff --git"), strings.HasPrefix(text, "index "), strings.HasPrefix(text, "--- "),
			strings.HasPrefix(text, "+++ "), strings.HasPrefix(text, "new file"), strings.HasPrefix(text, "deleted file"),
			strings.HasPrefix(text, "similarity"), strings.HasPrefix(text, "rename "):
			text = paint(true, colorBold, text)
		case strings.HasPrefix(text, "@@"):
			text = paint(true, colorCyan, text)
		case strings.HasPrefix(text, "+"):
			text = paint(true, colorGreen, text)
		case strings.HasPrefix(text, "-"):
			text = paint(true, colorRed, text)
		}
		fmt.Fprint(w, text)
		if strings.HasSuffix(line, "\n") {
			fmt.Fprintln(w)
		}
	}
}
