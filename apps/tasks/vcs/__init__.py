"""Git under the repository workspaces: the git CLI (`git`: every call bounded in time, never
prompting), one worktree and branch per task (`worktrees`), and a Team task's `@snapshot` as a
commit on its branch (`branch_snapshots`). Knows the rows and git only; the services and the run
sit above.
"""
