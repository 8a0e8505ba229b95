//! perf's event-list syntax around single events: groups (`{a,b}:u` is `a:u` leading
//! `b:u`) and modifiers (`cycles:u`, `pmu/config=1/pp`). One event of the list is
//! resolved by [`crate::parse_event`]; its modifiers are applied to [`AttrOptions`].

use crate::AttrOptions;

/// One event of an expanded event list, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventListEntry {
    /// The event with its modifiers (a group's modifiers appended to each member).
    pub name: String,
    /// The position (in the expanded list) of this event's group leader; None for
    /// leaders and ungrouped events.
    pub group_leader: Option<usize>,
}

/// An event list that is not perf's syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventListError {
    #[error("event group {group}: no closing brace")]
    UnclosedGroup { group: String },
    #[error("event group {group}: empty member")]
    EmptyMember { group: String },
    #[error("event {event}: unknown modifier {modifier:?} (known: {known})")]
    UnknownModifier {
        event: String,
        modifier: char,
        /// The modifiers the caller accepts, as "u, k, p".
        known: String,
    },
}

/// Expands perf's group syntax: `{a,b}:u` is `a:u` leading `b:u`. Commas inside a
/// PMU's `/terms/` do not separate members.
pub fn expand_groups(names: &[String]) -> Result<Vec<EventListEntry>, EventListError> {
    let mut expanded = Vec::new();
    for name in names {
        let Some(inner) = name.strip_prefix('{') else {
            expanded.push(EventListEntry {
                name: name.clone(),
                group_leader: None,
            });
            continue;
        };
        let Some((body, modifiers)) = inner.rsplit_once('}') else {
            return Err(EventListError::UnclosedGroup {
                group: name.clone(),
            });
        };
        let suffix = modifiers.trim_start_matches(':');
        let leader = expanded.len();
        for (member_index, member) in group_members(body).into_iter().enumerate() {
            if member.is_empty() {
                return Err(EventListError::EmptyMember {
                    group: name.clone(),
                });
            }
            let member = if suffix.is_empty() {
                member.to_owned()
            } else {
                format!("{member}:{suffix}")
            };
            expanded.push(EventListEntry {
                name: member,
                group_leader: (member_index > 0).then_some(leader),
            });
        }
    }
    Ok(expanded)
}

/// The members of a group's body, split at the commas outside `/terms/`.
fn group_members(body: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let mut start = 0;
    let mut inside_terms = false;
    for (position, character) in body.char_indices() {
        match character {
            '/' => inside_terms = !inside_terms,
            ',' if !inside_terms => {
                members.push(&body[start..position]);
                // ',' is one byte: the next member starts right after it.
                start = position + 1;
            }
            _ => {}
        }
    }
    members.push(&body[start..]);
    members
}

/// An event name split from its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModifiedEvent<'a> {
    /// The event, for [`crate::parse_event`]: `cycles`, `pmu/config=1/`.
    pub event: &'a str,
    /// The modifier letters, possibly empty: `u`, `pp`.
    pub modifiers: &'a str,
}

/// Splits perf's event modifiers off an event name: `cycles:u` and `pmu/config=1/u`
/// both give the event and "u".
pub fn split_modifiers(name: &str) -> ModifiedEvent<'_> {
    if let Some(end) = name.rfind('/') {
        if name[..end].contains('/') {
            let (event, rest) = name.split_at(end + 1);
            return ModifiedEvent {
                event,
                modifiers: rest.trim_start_matches(':'),
            };
        }
    }
    match name.rsplit_once(':') {
        Some((event, modifiers))
            if !modifiers.is_empty() && modifiers.chars().all(|c| c.is_ascii_lowercase()) =>
        {
            ModifiedEvent { event, modifiers }
        }
        _ => ModifiedEvent {
            event: name,
            modifiers: "",
        },
    }
}

/// One of perf's event modifiers that rvperf knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventModifier {
    /// `u`: user mode only (exclude_kernel).
    User,
    /// `k`: kernel mode only (exclude_user).
    Kernel,
    /// `p`: one more level of precise_ip (at most 3).
    Precise,
}

impl EventModifier {
    /// Every modifier, in the order perf's documentation lists them.
    pub const ALL: [EventModifier; 3] = [
        EventModifier::User,
        EventModifier::Kernel,
        EventModifier::Precise,
    ];

    /// The modifier's letter.
    pub fn letter(self) -> char {
        match self {
            EventModifier::User => 'u',
            EventModifier::Kernel => 'k',
            EventModifier::Precise => 'p',
        }
    }

    /// Sets what the modifier asks for in `options`.
    pub fn apply(self, options: &mut AttrOptions) {
        match self {
            EventModifier::User => options.exclude_kernel = true,
            EventModifier::Kernel => options.exclude_user = true,
            EventModifier::Precise => {
                options.precise_ip = options.precise_ip.saturating_add(1).min(3);
            }
        }
    }
}

/// The modifiers of `event` (its full name, for messages), each one of `known`.
pub fn parse_modifiers(
    event: &str,
    modifiers: &str,
    known: &[EventModifier],
) -> Result<Vec<EventModifier>, EventListError> {
    modifiers
        .chars()
        .map(|letter| {
            known
                .iter()
                .copied()
                .find(|modifier| modifier.letter() == letter)
                .ok_or_else(|| EventListError::UnknownModifier {
                    event: event.to_owned(),
                    modifier: letter,
                    known: known
                        .iter()
                        .map(|modifier| modifier.letter().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    fn entry(name: &str, group_leader: Option<usize>) -> EventListEntry {
        EventListEntry {
            name: name.to_owned(),
            group_leader,
        }
    }

    #[test]
    fn a_group_s_modifiers_go_to_every_member_and_members_name_their_leader() {
        let expanded = expand_groups(&names(&["cycles", "{cpu-clock,task-clock}:u"])).unwrap();
        assert_eq!(
            expanded,
            [
                entry("cycles", None),
                entry("cpu-clock:u", None),
                entry("task-clock:u", Some(1)),
            ]
        );
    }

    #[test]
    fn commas_inside_pmu_terms_do_not_split_a_group() {
        let expanded = expand_groups(&names(&["{pmu/config=1,config1=2/,instructions}"])).unwrap();
        assert_eq!(
            expanded,
            [
                entry("pmu/config=1,config1=2/", None),
                entry("instructions", Some(0)),
            ]
        );
    }

    #[test]
    fn malformed_groups_are_refused_with_the_group_named() {
        assert_eq!(
            expand_groups(&names(&["{cycles,instructions"])),
            Err(EventListError::UnclosedGroup {
                group: "{cycles,instructions".into()
            })
        );
        assert_eq!(
            expand_groups(&names(&["{cycles,}"]))
                .unwrap_err()
                .to_string(),
            "event group {cycles,}: empty member"
        );
    }

    #[test]
    fn modifiers_are_split_after_a_colon_or_a_pmu_s_closing_slash() {
        let split = |name| {
            let ModifiedEvent { event, modifiers } = split_modifiers(name);
            (event, modifiers)
        };
        assert_eq!(split("cycles:u"), ("cycles", "u"));
        assert_eq!(split("cycles"), ("cycles", ""));
        assert_eq!(split("pmu/config=1/pp"), ("pmu/config=1/", "pp"));
        assert_eq!(split("pmu/config=1/:k"), ("pmu/config=1/", "k"));
        assert_eq!(split("pmu/config=1/"), ("pmu/config=1/", ""));
        // Not modifiers: upper case or digits after the colon.
        assert_eq!(split("event:U1"), ("event:U1", ""));
    }

    #[test]
    fn modifiers_set_the_attr_options_perf_sets() {
        let modifiers = parse_modifiers("cycles:uppp", "uppp", &EventModifier::ALL).unwrap();
        let mut options = AttrOptions::default();
        for modifier in modifiers {
            modifier.apply(&mut options);
        }
        assert!(options.exclude_kernel && !options.exclude_user);
        // Three p's is the most precise level; a fourth would stay there.
        assert_eq!(options.precise_ip, 3);
        EventModifier::Precise.apply(&mut options);
        assert_eq!(options.precise_ip, 3);
    }

    #[test]
    fn an_unknown_modifier_names_the_event_and_the_known_ones() {
        let error = parse_modifiers(
            "cycles:p",
            "p",
            &[EventModifier::User, EventModifier::Kernel],
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "event cycles:p: unknown modifier 'p' (known: u, k)"
        );
        let error = parse_modifiers("cycles:x", "x", &EventModifier::ALL).unwrap_err();
        assert_eq!(
            error.to_string(),
            "event cycles:x: unknown modifier 'x' (known: u, k, p)"
        );
    }
}
