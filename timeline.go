package belay

// TimelineNode is a checkpoint with the checkpoints that descend from it.
type TimelineNode struct {
	*Checkpoint
	Children []*TimelineNode `json:"children"`
	// Head marks the session's head: the checkpoint the next one descends from.
	Head bool `json:"head,omitempty"`
}

// Timeline arranges a session's checkpoints (in any order) as the tree its
// rollbacks made: each checkpoint under its parent, children and roots in
// the order given. A checkpoint whose parent is not among them (deleted) is a
// root of its own.
func Timeline(cps []*Checkpoint, headID string) []*TimelineNode {
	nodes := make(map[string]*TimelineNode, len(cps))
	for _, c := range cps {
		nodes[c.ID] = &TimelineNode{Checkpoint: c, Children: []*TimelineNode{}, Head: c.ID == headID}
	}
	roots := []*TimelineNode{}
	for _, c := range cps {
		if p, ok := nodes[c.ParentID]; ok && c.ParentID != c.ID {
			p.Children = append(p.Children, nodes[c.ID])
		} else {
			roots = append(roots, nodes[c.ID])
		}
	}
	return roots
}
