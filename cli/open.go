package cli

import (
	"fmt"
	"net/url"
	"os/exec"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// openCommand opens the dashboard of the server BELAY_URL names (else of
// `belay serve` on its default address) in the default browser.
func (a *app) openCommand() *cobra.Command {
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "open",
		Short: "Open the web dashboard in the default browser",
		Long: `Open the web dashboard of the belay server BELAY_URL names, or of
` + "`belay serve`" + ` on its default address, in the default browser. Sign in there with
an API token (BELAY_TOKEN, or the one ` + "`belay serve`" + ` printed on its first start).`,
		Args: args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			u, err := a.dashboardURL()
			if err != nil {
				return err
			}
			res := struct {
				URL    string `json:"url"`
				Opened bool   `json:"opened"`
			}{URL: u}
			if !printOnly {
				err := openBrowser(u)
				if err != nil && !a.json {
					fmt.Fprintf(a.env.Stderr, "Could not start a browser (%v); open %s yourself.\n", err, u)
					return nil
				}
				res.Opened = err == nil
			}
			switch {
			case a.json:
				return a.printJSON(res)
			case res.Opened:
				fmt.Fprintf(a.env.Stdout, "Opened %s\n", u)
			default:
				fmt.Fprintln(a.env.Stdout, u)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the dashboard's URL instead of opening it")
	return cmd
}

func (a *app) dashboardURL() (string, error) {
	base := a.env.Getenv("BELAY_URL")
	if base == "" {
		return "http://" + DefaultAddr + "/", nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", belay.Invalid("BELAY_URL", "BELAY_URL must be an http(s) URL, got %q", belay.Clip(base, 80))
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/"
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String(), nil
}

// openBrowser asks the desktop to open u.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // the opener's exit status says nothing useful
	return nil
}
