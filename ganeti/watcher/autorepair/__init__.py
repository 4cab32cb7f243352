"""Auto-repair: instances on unusable nodes repaired as their tags allow
(the policy and the state machine in tags, the repairs as jobs)."""
