//! Cycles in a small directed graph: a workflow's step dependencies, a protocol's steps,
//! protocols calling protocols.

/// A cycle as the names along it, the first repeated at the end, or `None`. Iterative, so a
/// long chain cannot overflow the stack.
pub fn find_cycle(edges: &[Vec<usize>], names: &[String]) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Finished,
    }
    let mut marks = vec![Mark::New; edges.len()];
    for start in 0..edges.len() {
        if marks[start] != Mark::New {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            match edges[node].get(*next).copied() {
                Some(target) => {
                    *next += 1;
                    match marks[target] {
                        Mark::New => {
                            marks[target] = Mark::OnPath;
                            path.push((target, 0));
                        }
                        Mark::OnPath => {
                            let from = path.iter().position(|&(step, _)| step == target).unwrap_or(0);
                            let mut cycle: Vec<String> = path[from..].iter().map(|&(step, _)| names[step].clone()).collect();
                            cycle.push(names[target].clone());
                            return Some(cycle);
                        }
                        Mark::Finished => {}
                    }
                }
                None => {
                    marks[node] = Mark::Finished;
                    path.pop();
                }
            }
        }
    }
    None
}
