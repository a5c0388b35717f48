#pragma once
// The discrete-event engine. Integer time; events ordered by (time, sequence) so runs
// repeat bit for bit (docs/architecture.md "Conventions"). A task starts when its dependencies have ended and it is
// next on every one of its streams; transfers progress at rates recomputed by progressive filling (max-min fairness, as
// SimGrid's LMM) whenever a transfer starts or ends on a shared link.
#include <optional>

#include "trainsim/sim/task_graph.hpp"
#include "trainsim/sim/timeline.hpp"

namespace trainsim::sim {

// Throws InternalError when tasks can never start (a dependency cycle, or streams whose orders
// wait on one another).
Timeline run(const TaskGraph& graph);

// What `task` waited on last: whichever of its dependencies and its predecessors on its streams
// ended last (the first of them on a tie, dependencies before streams); none when it waited on
// nothing. Walked back from a step's last task, it traces the step's critical path.
std::optional<TaskId> last_predecessor(const TaskGraph& graph, const Timeline& timeline, TaskId task);

}  // namespace trainsim::sim
