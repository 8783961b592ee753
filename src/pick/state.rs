//! The picker's state and what each key does to it, with no terminal and
//! no database: the query line, the filters typed into it, which sessions
//! are searched, the selection, and what the user chose.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The roles Ctrl-R cycles through (`search --role`), after "any": the
/// first of the search's own list (`query::search::ROLES`), those of the
/// conversation, up to bash.
pub const ROLES: &[&str] = crate::query::search::ROLES.split_at(6).0;

/// Which sessions are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Sessions whose cwd is the current directory or below it.
    Here,
    All,
}

/// What the user wants done with the selected row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Resume it in Pi (Enter).
    Resume,
    /// Print its transcript (Ctrl-O).
    Show,
    /// Print the session file rebuilt from the index (Ctrl-X).
    Export,
    /// Print the session file's path (Ctrl-Y).
    PrintPath,
}

/// The query line: text and a cursor (a char index).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    text: String,
    cursor: usize,
}

impl Line {
    pub fn new(text: &str) -> Line {
        Line {
            text: text.to_owned(),
            cursor: text.chars().count(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor, in chars from the start.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    fn byte_at(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(at, _)| at)
    }

    fn insert(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.text.chars().count() {
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    /// Ctrl-W: the word before the cursor, and the spaces after it.
    fn delete_word(&mut self) {
        let chars: Vec<char> = self.text.chars().collect();
        let mut start = self.cursor;
        while start > 0 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        let (from, to) = (self.byte_at(start), self.byte_at(self.cursor));
        self.text.replace_range(from..to, "");
        self.cursor = start;
    }

    /// Ctrl-U: everything before the cursor.
    fn delete_to_start(&mut self) {
        let to = self.byte_at(self.cursor);
        self.text.replace_range(..to, "");
        self.cursor = 0;
    }

    fn move_to(&mut self, chars: usize) {
        self.cursor = chars.min(self.text.chars().count());
    }
}

/// A query split into the words searched and the filters typed among them
/// (`role:user`, `model:opus`, `since:7d`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub words: String,
    pub roles: Vec<String>,
    pub model: Option<String>,
    pub since: Option<String>,
    /// The last word is still being typed (no space after it).
    pub open: bool,
}

impl Query {
    /// Splits `text`; a filter with an empty value is ignored, an unknown
    /// `name:value` is a word (it may be code: `std::io`).
    pub fn parse(text: &str) -> Query {
        let mut query = Query::default();
        let mut words = Vec::new();
        for token in text.split_whitespace() {
            match token.split_once(':') {
                Some(("role", role)) => {
                    if !role.is_empty() {
                        query.roles.push(role.to_owned());
                    }
                }
                Some(("model", model)) => {
                    query.model = Some(model.to_owned()).filter(|m| !m.is_empty());
                }
                Some(("since", since)) => {
                    query.since = Some(since.to_owned()).filter(|s| !s.is_empty());
                }
                _ => words.push(token),
            }
        }
        query.words = words.join(" ");
        query.open = !text.ends_with(char::is_whitespace);
        query
    }

    /// Filters that only hits can meet (a session's title has no role or model).
    pub fn hits_only(&self) -> bool {
        !self.roles.is_empty() || self.model.is_some()
    }
}

/// What a key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do (an unbound key).
    Nothing,
    /// The selection or the screen changed; the results did not.
    Moved,
    /// The query, the filters or the reach changed: search again.
    Requery,
    /// Done: act on the selected row, or `None` to leave without a choice.
    Done(Option<Action>),
}

/// The picker's state between keys.
#[derive(Debug, Clone)]
pub struct State {
    pub line: Line,
    pub reach: Reach,
    /// The role Ctrl-R chose (an index in `ROLES`), on top of the typed ones.
    pub role: Option<usize>,
    pub selected: usize,
    pub rows: usize,
    /// Rows a page moves.
    pub page: usize,
}

impl State {
    pub fn new(query: &str, reach: Reach) -> State {
        State {
            line: Line::new(query),
            reach,
            role: None,
            selected: 0,
            rows: 0,
            page: 10,
        }
    }

    /// The query as typed, with Ctrl-R's role added.
    pub fn query(&self) -> Query {
        let mut query = Query::parse(self.line.text());
        if let Some(role) = self.role {
            query.roles.push(ROLES[role].to_owned());
        }
        query
    }

    /// New results replaced the old: the selection goes back to the top.
    pub fn set_rows(&mut self, rows: usize) {
        self.rows = rows;
        self.selected = 0;
    }

    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        if key.kind == KeyEventKind::Release {
            return Outcome::Nothing;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let before = self.line.clone();
        match (key.code, ctrl) {
            (KeyCode::Esc, _) | (KeyCode::Char('c' | 'g' | 'd'), true) => {
                return Outcome::Done(None);
            }
            (KeyCode::Enter, _) => return self.done(Action::Resume),
            (KeyCode::Char('o'), true) => return self.done(Action::Show),
            (KeyCode::Char('x'), true) => return self.done(Action::Export),
            (KeyCode::Char('y'), true) => return self.done(Action::PrintPath),
            (KeyCode::Tab | KeyCode::BackTab, _) => {
                self.reach = match self.reach {
                    Reach::Here => Reach::All,
                    Reach::All => Reach::Here,
                };
                return Outcome::Requery;
            }
            (KeyCode::Char('r'), true) => {
                self.role = match self.role {
                    None => Some(0),
                    Some(i) if i + 1 < ROLES.len() => Some(i + 1),
                    Some(_) => None,
                };
                return Outcome::Requery;
            }
            (KeyCode::Up, _) | (KeyCode::Char('p' | 'k'), true) => {
                return self.select(self.selected.saturating_sub(1));
            }
            (KeyCode::Down, _) | (KeyCode::Char('n' | 'j'), true) => {
                return self.select(self.selected + 1);
            }
            (KeyCode::PageUp, _) => return self.select(self.selected.saturating_sub(self.page)),
            (KeyCode::PageDown, _) => return self.select(self.selected + self.page),
            (KeyCode::Char('u'), true) => self.line.delete_to_start(),
            (KeyCode::Char('w'), true) => self.line.delete_word(),
            (KeyCode::Char('a'), true) | (KeyCode::Home, _) => self.line.move_to(0),
            (KeyCode::Char('e'), true) | (KeyCode::End, _) => self.line.move_to(usize::MAX),
            (KeyCode::Left, _) | (KeyCode::Char('b'), true) => {
                self.line.move_to(self.line.cursor.saturating_sub(1));
            }
            (KeyCode::Right, _) | (KeyCode::Char('f'), true) => {
                self.line.move_to(self.line.cursor + 1);
            }
            (KeyCode::Backspace, _) | (KeyCode::Char('h'), true) => self.line.backspace(),
            (KeyCode::Delete, _) => self.line.delete(),
            (KeyCode::Char(c), false) => self.line.insert(c),
            _ => return Outcome::Nothing,
        }
        if self.line.text() != before.text() {
            Outcome::Requery
        } else if self.line != before {
            Outcome::Moved
        } else {
            Outcome::Nothing
        }
    }

    fn select(&mut self, row: usize) -> Outcome {
        let row = row.min(self.rows.saturating_sub(1));
        if row == self.selected {
            return Outcome::Nothing;
        }
        self.selected = row;
        Outcome::Moved
    }

    fn done(&self, action: Action) -> Outcome {
        if self.rows == 0 {
            Outcome::Nothing
        } else {
            Outcome::Done(Some(action))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn filters_are_taken_out_of_the_words() {
        let query = Query::parse("role:user parser  model:opus since:7d std::io role:");
        assert_eq!(query.words, "parser std::io");
        assert_eq!(query.roles, ["user"]);
        assert_eq!(query.model.as_deref(), Some("opus"));
        assert_eq!(query.since.as_deref(), Some("7d"));
        assert!(query.hits_only());
        assert!(!Query::parse("since:2026-01-01 x").hits_only());
    }

    #[test]
    fn typing_edits_the_line_at_the_cursor() {
        let mut state = State::new("ab", Reach::All);
        assert_eq!(state.key(key(KeyCode::Left)), Outcome::Moved);
        assert_eq!(state.key(key(KeyCode::Char('é'))), Outcome::Requery);
        assert_eq!(state.line.text(), "aéb");
        state.key(key(KeyCode::End));
        state.key(key(KeyCode::Char(' ')));
        state.key(key(KeyCode::Char('c')));
        assert_eq!(state.key(ctrl('w')), Outcome::Requery);
        assert_eq!(state.line.text(), "aéb ");
        state.key(key(KeyCode::Backspace));
        state.key(key(KeyCode::Home));
        assert_eq!(state.key(key(KeyCode::Delete)), Outcome::Requery);
        assert_eq!(state.line.text(), "éb");
        state.key(key(KeyCode::End));
        assert_eq!(state.key(ctrl('u')), Outcome::Requery);
        assert_eq!(state.line.text(), "");
    }

    #[test]
    fn keys_move_toggle_and_choose() {
        let mut state = State::new("x", Reach::Here);
        assert_eq!(state.key(key(KeyCode::Enter)), Outcome::Nothing, "no rows");
        state.set_rows(3);
        assert_eq!(state.key(key(KeyCode::Up)), Outcome::Nothing);
        assert_eq!(state.key(key(KeyCode::Down)), Outcome::Moved);
        assert_eq!(state.key(key(KeyCode::PageDown)), Outcome::Moved);
        assert_eq!(state.selected, 2);
        assert_eq!(state.key(key(KeyCode::Tab)), Outcome::Requery);
        assert_eq!(state.reach, Reach::All);
        assert_eq!(state.key(ctrl('r')), Outcome::Requery);
        assert_eq!(state.query().roles, ["user"]);
        assert_eq!(state.key(ctrl('o')), Outcome::Done(Some(Action::Show)));
        assert_eq!(state.key(ctrl('y')), Outcome::Done(Some(Action::PrintPath)));
        assert_eq!(
            state.key(key(KeyCode::Enter)),
            Outcome::Done(Some(Action::Resume))
        );
        assert_eq!(state.key(ctrl('c')), Outcome::Done(None));
        assert_eq!(state.key(key(KeyCode::Esc)), Outcome::Done(None));
    }
}
