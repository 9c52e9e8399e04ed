package cli

import (
	"errors"
	"io"

	"github.com/spf13/cobra"
)

const mcpLong = `Serve belay's MCP tools over standard input and output, for a coding agent
(Claude Code, Cursor, Codex, any MCP client) that starts belay as a tool
server. It works on the local database, or on a server with BELAY_URL and
BELAY_TOKEN, like every command. The tools: checkpoint_save, checkpoint_search,
checkpoint_list, checkpoint_get, checkpoint_diff, checkpoint_rollback,
session_resume, ask_human and hitl_wait.

A client's configuration, e.g. .mcp.json:

  {"mcpServers": {"belay": {"command": "belay", "args": ["mcp"]}}}

belay serve also serves the same tools over streamable HTTP at /mcp, with the
API's bearer tokens.`

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the MCP tools on standard input and output (for coding agents)",
		Long:  mcpLong,
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.env.Backend.MCP == nil {
				return errors.New("this build of belay has no MCP server")
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			return a.env.Backend.MCP(ctx, svc, io.NopCloser(a.env.Stdin), nopWriteCloser{a.env.Stdout})
		},
	}
}

// nopWriteCloser lets the MCP transport close standard output without
// closing it for the process.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
