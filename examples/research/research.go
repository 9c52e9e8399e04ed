// Package research is seed 001's research workflow on the graph runtime:
// plan_research → search → synthesize → await_approval → generate_ideas,
// pausing at await_approval for a person who approves (on to the ideas),
// refines with feedback (back to planning, the feedback in the state) or
// restarts (the state cleared, planning again). The model is an interface;
// Offline is a deterministic one that needs no network.
package research

import (
	"context"
	"fmt"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// Option ids of the approval request (seed 001's).
const (
	Approved = "approved"
	Refine   = "refine"
	Restart  = "restart"
)

// Source is a search result.
type Source struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// Trend is one finding of the research.
type Trend struct {
	Title        string   `json:"title"`
	Summary      string   `json:"summary"`
	WhyItMatters string   `json:"whyItMatters"`
	Confidence   string   `json:"confidence"`
	Sources      []Source `json:"sources"`
}

// State is the workflow's state, stored after every step.
type State struct {
	Topic      string   `json:"topic"`
	Queries    []string `json:"queries,omitempty"`
	Sources    []Source `json:"sources,omitempty"`
	Trends     []Trend  `json:"trends,omitempty"`
	Feedback   string   `json:"refinementFeedback,omitempty"`
	HITLStatus string   `json:"hitlStatus,omitempty"`
	Ideas      []string `json:"ideas,omitempty"`
	// Rounds counts the plans made, refinements and restarts included.
	Rounds int `json:"rounds"`
}

// Model does the workflow's thinking. A real one calls a language model and a
// search engine; Offline answers from the text it is given.
type Model interface {
	Plan(ctx context.Context, topic, feedback string) ([]string, error)
	Search(ctx context.Context, query string) ([]Source, error)
	Synthesize(ctx context.Context, topic string, sources []Source) ([]Trend, error)
	Ideas(ctx context.Context, trends []Trend) ([]string, error)
}

// Offline is a deterministic model: the same input always gives the same
// plan, sources, trends and ideas.
type Offline struct{}

// Plan returns three queries about topic, narrowed by feedback when given.
func (Offline) Plan(_ context.Context, topic, feedback string) ([]string, error) {
	qs := []string{topic + " adoption", topic + " tooling", topic + " risks"}
	if feedback != "" {
		for i := range qs {
			qs[i] += " (" + feedback + ")"
		}
	}
	return qs, nil
}

// Search returns two sources per query.
func (Offline) Search(_ context.Context, query string) ([]Source, error) {
	slug := strings.ReplaceAll(strings.ToLower(query), " ", "-")
	return []Source{
		{URL: "https://example.org/" + slug, Title: "Survey: " + query},
		{URL: "https://example.com/" + slug, Title: "Field notes: " + query},
	}, nil
}

// Synthesize makes one trend per two sources.
func (Offline) Synthesize(_ context.Context, topic string, sources []Source) ([]Trend, error) {
	var trends []Trend
	for i := 0; i+1 < len(sources); i += 2 {
		trends = append(trends, Trend{
			Title:        strings.TrimPrefix(sources[i].Title, "Survey: "),
			Summary:      "two sources on " + topic + " agree",
			WhyItMatters: "it shapes what to build next",
			Confidence:   "medium",
			Sources:      sources[i : i+2],
		})
	}
	return trends, nil
}

// Ideas makes one idea per trend.
func (Offline) Ideas(_ context.Context, trends []Trend) ([]string, error) {
	ideas := make([]string, len(trends))
	for i, t := range trends {
		ideas[i] = "Build something for " + t.Title
	}
	return ideas, nil
}

// Options are the choices of the approval request.
var Options = []belay.HITLOption{
	{ID: Approved, Label: "Approve", Description: "generate ideas from these trends", Action: belay.ActionApprove, IsDefault: true},
	{ID: Refine, Label: "Refine", Description: "research again with your feedback", Action: belay.ActionRetry},
	{ID: Restart, Label: "Restart", Description: "start the research over", Action: belay.ActionReject},
}

// New returns the research workflow on model m.
func New(m Model) (*graph.Compiled[State], error) {
	return graph.New[State]().
		AddNode("plan_research", func(ctx context.Context, s State) (State, error) {
			q, err := m.Plan(ctx, s.Topic, s.Feedback)
			s.Queries, s.Rounds = q, s.Rounds+1
			if err == nil {
				graph.Emit(ctx, "plan", map[string]any{"queries": q, "round": s.Rounds})
			}
			return s, err
		}).
		AddNode("search", func(ctx context.Context, s State) (State, error) {
			s.Sources = nil
			for _, q := range s.Queries {
				found, err := m.Search(ctx, q)
				if err != nil {
					return s, err
				}
				s.Sources = append(s.Sources, found...)
			}
			return s, nil
		}).
		AddNode("synthesize", func(ctx context.Context, s State) (State, error) {
			t, err := m.Synthesize(ctx, s.Topic, s.Sources)
			s.Trends = t
			for _, trend := range t {
				graph.Emit(ctx, "trend", map[string]any{"title": trend.Title, "confidence": trend.Confidence})
			}
			return s, err
		}).
		AddNode("await_approval", awaitApproval).
		AddNode("generate_ideas", func(ctx context.Context, s State) (State, error) {
			ideas, err := m.Ideas(ctx, s.Trends)
			s.Ideas = ideas
			for _, idea := range ideas {
				graph.Emit(ctx, "idea", map[string]any{"idea": idea})
			}
			return s, err
		}).
		AddEdge(graph.START, "plan_research").
		AddEdge("plan_research", "search").
		AddEdge("search", "synthesize").
		AddEdge("synthesize", "await_approval").
		AddConditionalEdges("await_approval", func(s State) string {
			if s.HITLStatus == Approved {
				return "generate_ideas"
			}
			return "plan_research"
		}, "generate_ideas", "plan_research").
		AddEdge("generate_ideas", graph.END).
		Compile()
}

// awaitApproval shows the trends and asks what to do. It runs again from its
// start on resume, so it does nothing before the Interrupt.
func awaitApproval(ctx context.Context, s State) (State, error) {
	d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{
		Title:   "Research complete: review the trends",
		Message: fmt.Sprintf("%d trends on %s. Approve, refine with feedback, or restart.", len(s.Trends), s.Topic),
		Options: Options,
		Context: map[string]any{"trends": s.Trends},
	})
	if err != nil {
		return s, err
	}
	s.HITLStatus = d.Option
	switch d.Option {
	case Refine:
		s.Feedback, s.Trends, s.Sources = d.Feedback, nil, nil
	case Restart:
		s = State{Topic: s.Topic, HITLStatus: Restart, Rounds: s.Rounds}
	}
	return s, nil
}
