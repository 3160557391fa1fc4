package prefetch

// The header lines of the plan format (plan.go), for writers of plans: a plan is one of these,
// "\n", then one sample per line.
const (
	// PlanHeaderPaths starts a plan of paths of regular files relative to the mount root.
	PlanHeaderPaths = "aifs-plan 1 paths"
	// PlanHeaderIndices starts a plan of decimal indices: i is the i-th regular file in pack order.
	PlanHeaderIndices = "aifs-plan 1 indices"
)
