//! The collapse stage of a flame graph (inferno's separation: collapse, then draw):
//! samples' stacks of addresses become [`FoldedStacks`] of names.
//!
//! A recording has hundreds of thousands of frames but a few thousand distinct stacks,
//! so stacks are gathered as frame numbers and named once at the end. An address is
//! first reduced to a *location* whose names do not depend on the process or the time
//! (a file and an offset in it): one lookup per location, however many processes map
//! the file. Addresses with no location (the kernel's, or in no mapping) are named
//! last, all at once, so that a caller can read the kernel's symbols meanwhile.
//!
//! Naming is the caller's ([`StackSymbols`]): this crate knows no symbol tables.

use std::hash::Hash;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::FoldedStacks;

/// Names for the addresses of stacks: a symbolizer as the collapse stage sees it.
pub trait StackSymbols {
    /// Where an address is, independent of the process and the time (such as a file
    /// and an offset in it): equal locations have equal names.
    type Location: Hash + Eq;

    /// The location of `address` in process `pid`, or `None` when it has none (a
    /// kernel address, an address in no mapping): such an address is named by
    /// [`unlocated_frames`](Self::unlocated_frames) once the stacks are all in.
    fn locate(&mut self, pid: u32, address: u64) -> Option<Self::Location>;

    /// The frame names at `location`, innermost (inlined) first, each passed to `frame`.
    fn located_frames(&mut self, location: &Self::Location, frame: &mut dyn FnMut(&str));

    /// The frame names at an address without a location, innermost first;
    /// `occurrences` is how often the stacks held it (for the caller's diagnostics).
    fn unlocated_frames(&mut self, address: u64, occurrences: u64, frame: &mut dyn FnMut(&str));
}

/// A frame of a stack being gathered: a name's number, or an address named at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Frame {
    Named(u32),
    Unlocated(u32),
}

/// An address without a location, with how often stacks held it.
#[derive(Debug, Clone, Copy)]
struct UnlocatedAddress {
    address: u64,
    occurrences: u64,
}

/// Frame names by number.
#[derive(Debug, Default)]
struct FrameNames {
    names: Vec<Rc<str>>,
    numbers: FxHashMap<Rc<str>, u32>,
}

impl FrameNames {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&number) = self.numbers.get(name) {
            return number;
        }
        // More than 2^32 distinct names would not fit in memory first.
        let number = u32::try_from(self.names.len()).expect("fewer than 2^32 frame names");
        let name: Rc<str> = Rc::from(name);
        self.names.push(Rc::clone(&name));
        self.numbers.insert(name, number);
        number
    }
}

/// Stacks of addresses summed per distinct stack, named at the end.
///
/// A stack is built leaf first ([`push_address`](Self::push_address), then
/// [`push_name`](Self::push_name) for synthetic roots such as the command name) and
/// closed by [`end_stack`](Self::end_stack).
#[derive(Debug)]
pub struct StackCollapser<L> {
    names: FrameNames,
    /// The frames of each location, innermost first: a range of `located_frames`.
    located: FxHashMap<L, std::ops::Range<usize>>,
    located_frames: Vec<Frame>,
    unlocated: Vec<UnlocatedAddress>,
    unlocated_numbers: FxHashMap<u64, u32>,
    /// The stack being gathered, leaf first.
    current: Vec<Frame>,
    /// Distinct stacks, root first, with their summed weights.
    stacks: FxHashMap<Box<[Frame]>, u64>,
}

impl<L> Default for StackCollapser<L> {
    fn default() -> Self {
        Self {
            names: FrameNames::default(),
            located: FxHashMap::default(),
            located_frames: Vec::new(),
            unlocated: Vec::new(),
            unlocated_numbers: FxHashMap::default(),
            current: Vec::new(),
            stacks: FxHashMap::default(),
        }
    }
}

impl<L: Hash + Eq> StackCollapser<L> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the frames at `address` of process `pid` (inlined frames first) to the
    /// stack being gathered, which is built leaf first.
    pub fn push_address<S: StackSymbols<Location = L>>(
        &mut self,
        symbols: &mut S,
        pid: u32,
        address: u64,
    ) {
        let Some(location) = symbols.locate(pid, address) else {
            let next = u32::try_from(self.unlocated.len()).expect("fewer than 2^32 addresses");
            let number = *self.unlocated_numbers.entry(address).or_insert(next);
            if number == next {
                self.unlocated.push(UnlocatedAddress {
                    address,
                    occurrences: 0,
                });
            }
            let unlocated = &mut self.unlocated[number as usize];
            unlocated.occurrences = unlocated.occurrences.saturating_add(1);
            self.current.push(Frame::Unlocated(number));
            return;
        };
        if let Some(range) = self.located.get(&location) {
            self.current
                .extend_from_slice(&self.located_frames[range.clone()]);
            return;
        }
        let start = self.located_frames.len();
        let names = &mut self.names;
        let located_frames = &mut self.located_frames;
        symbols.located_frames(&location, &mut |name| {
            located_frames.push(Frame::Named(names.intern(name)));
        });
        let range = start..self.located_frames.len();
        self.current
            .extend_from_slice(&self.located_frames[range.clone()]);
        self.located.insert(location, range);
    }

    /// Appends a frame of this name (a root such as the command name) to the stack
    /// being gathered.
    pub fn push_name(&mut self, name: &str) {
        let number = self.names.intern(name);
        self.current.push(Frame::Named(number));
    }

    /// Ends the stack being gathered, adding `weight` to it (sums saturate: weights
    /// are periods read from files).
    pub fn end_stack(&mut self, weight: u64) {
        // Gathered leaf first; folded stacks are root first.
        self.current.reverse();
        match self.stacks.get_mut(self.current.as_slice()) {
            Some(total) => *total = total.saturating_add(weight),
            None => {
                self.stacks.insert(self.current.as_slice().into(), weight);
            }
        }
        self.current.clear();
    }

    /// Names the addresses without a location and spells out every stack.
    pub fn finish<S: StackSymbols<Location = L>>(mut self, symbols: &mut S) -> FoldedStacks {
        // Root first, as the stacks are: each address's frames outermost first.
        let unlocated: Vec<Vec<u32>> = std::mem::take(&mut self.unlocated)
            .into_iter()
            .map(|unlocated| {
                let mut numbers = Vec::new();
                let names = &mut self.names;
                symbols.unlocated_frames(unlocated.address, unlocated.occurrences, &mut |name| {
                    numbers.push(names.intern(name));
                });
                numbers.reverse();
                numbers
            })
            .collect();
        let names = &self.names.names;
        let mut folded = FoldedStacks::new();
        let mut frames: Vec<&str> = Vec::new();
        for (stack, &weight) in &self.stacks {
            frames.clear();
            for frame in stack.iter() {
                match *frame {
                    Frame::Named(number) => frames.push(&names[number as usize]),
                    Frame::Unlocated(number) => frames.extend(
                        unlocated[number as usize]
                            .iter()
                            .map(|&name| &*names[name as usize]),
                    ),
                }
            }
            folded.add(frames.iter().copied(), weight);
        }
        folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses below 0x1000 are located in "file" `address / 0x100` with one name
    /// per location; others are unlocated and named `[k ADDRESS]`.
    #[derive(Default)]
    struct Fake {
        lookups: usize,
        unlocated_named: Vec<(u64, u64)>,
    }

    impl StackSymbols for Fake {
        type Location = u64;
        fn locate(&mut self, _pid: u32, address: u64) -> Option<u64> {
            (address < 0x1000).then_some(address / 0x100)
        }
        fn located_frames(&mut self, location: &u64, frame: &mut dyn FnMut(&str)) {
            self.lookups += 1;
            // An inline frame above the function: innermost first.
            frame(&format!("inlined{location}"));
            frame(&format!("function{location}"));
        }
        fn unlocated_frames(
            &mut self,
            address: u64,
            occurrences: u64,
            frame: &mut dyn FnMut(&str),
        ) {
            self.unlocated_named.push((address, occurrences));
            frame(&format!("[k {address:#x}]"));
        }
    }

    #[test]
    fn stacks_are_root_first_summed_and_each_location_named_once() {
        let mut symbols = Fake::default();
        let mut collapser = StackCollapser::new();
        for weight in [3, 4] {
            collapser.push_address(&mut symbols, 1, 0x110);
            collapser.push_address(&mut symbols, 1, 0x220);
            collapser.push_address(&mut symbols, 1, 0xffff_0000);
            collapser.push_name("command");
            collapser.end_stack(weight);
        }
        collapser.push_address(&mut symbols, 2, 0x120);
        collapser.end_stack(u64::MAX);
        collapser.push_address(&mut symbols, 2, 0x130);
        collapser.end_stack(1);
        let folded = collapser.finish(&mut symbols);
        assert_eq!(
            folded.to_text(),
            "command;[k 0xffff0000];function2;inlined2;function1;inlined1 7\n\
             function1;inlined1 18446744073709551615\n"
        );
        // Locations 1 and 2 looked up once each; the kernel address named once, at
        // the end, with how often it was seen.
        assert_eq!(symbols.lookups, 2);
        assert_eq!(symbols.unlocated_named, [(0xffff_0000, 2)]);
    }
}
