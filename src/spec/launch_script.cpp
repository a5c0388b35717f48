// A launch script's launch command, expanded as bash expands it, for the constructs launch
// scripts use (NVIDIA's Megatron-LM examples: examples/gpt3/train_gpt3_175b_distributed.sh,
// examples/llama/train_llama3_8b_h100_fp8.sh): variables and arrays, their expansions, `if` on
// `[[ ]]` tests, continuations, comments. Anything else that could change the command is an error
// naming the construct and its line; commands that cannot (mkdir, echo, ...) are skipped.
// (One file of about 650 lines, above the usual 400: the tokenizer, the statements and the expander
// are one small shell and share its variables.)
#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "trainsim/spec/launch_config.hpp"
#include "trainsim/util/error.hpp"

namespace trainsim::spec {
namespace {

struct Token {
  enum Kind { Word, Op, Newline } kind = Word;
  std::string text;  // a word's raw text, quotes kept; an operator's characters
  int line = 1;
};

// Commands that leave the launch command alone (no variable of the script changes).
constexpr std::array<std::string_view, 16> kHarmless{"mkdir", "echo",  "printf", "set",        "cd",   "true",
                                                     ":",     "sleep", "ulimit", "nvidia-smi", "date", "hostname",
                                                     "rm",    "touch", "cp",     "ln"};

bool is_name_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

class Script {
 public:
  Script(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  std::vector<std::string> launch_words() {
    tokenize();
    run();
    if (!launch_) fail(line_, "no launch command (torchrun, python -m torch.distributed.run, or pretrain_gpt.py)");
    return *launch_;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw SpecError(source_, "", fmt::format("line {}: {}", line, what));
  }

  // The expander recurses once per nested ${X-${Y-...}} default and per parenthesis or sign in
  // $(( )): bounded, as the TOML reader bounds nesting, before the stack runs out (200,000 levels
  // of parentheses did).
  static constexpr int kMaxNesting = 64;
  struct Nested {
    Script& s;
    explicit Nested(Script& script) : s(script) {
      if (++s.depth_ > kMaxNesting)
        s.fail(s.line_, fmt::format("expansions nested deeper than {} levels are not supported", kMaxNesting));
    }
    ~Nested() { --s.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
  };

  // ---- tokens: words with their quoting kept, operators, line ends
  struct Lexer {
    std::size_t i = 0;
    int line = 1;
    std::string word;
    bool in_word = false;
    int word_line = 1;
  };

  void end_word() {
    if (lex_.in_word) tokens_.push_back({Token::Word, std::move(lex_.word), lex_.word_line});
    lex_.word.clear();
    lex_.in_word = false;
  }
  void take(char c) {
    if (!lex_.in_word) lex_.word_line = lex_.line;
    lex_.in_word = true;
    lex_.word += c;
  }
  // Takes text_[i] on to the bracket that closes the one there (counting lines), kept whole;
  // false where the text ends first.
  bool take_bracketed(char open, char close) {
    auto& i = lex_.i;
    int depth = 0;
    do {
      if (text_[i] == open) ++depth;
      if (text_[i] == close) --depth;
      if (text_[i] == '\n') ++lex_.line;
      take(text_[i++]);
    } while (depth > 0 && i < text_.size());
    return depth == 0;
  }
  // A quoted string from its opening quote to its closing one, kept whole.
  void take_quoted(char quote) {
    auto& i = lex_.i;
    const int start = lex_.line;
    take(quote);
    ++i;
    while (i < text_.size() && text_[i] != quote) {
      if (quote == '"' && text_[i] == '\\' && i + 1 < text_.size()) take(text_[i++]);
      if (quote == '"' && text_[i] == '$' && i + 1 < text_.size() && text_[i + 1] == '(') {
        // a command substitution inside double quotes holds quotes of its own
        take_bracketed('(', ')');  // unterminated, it runs into the end: an unterminated quote
        continue;
      }
      if (text_[i] == '\n') ++lex_.line;
      take(text_[i++]);
    }
    if (i >= text_.size()) fail(start, fmt::format("unterminated {} quote", quote == '"' ? "double" : "single"));
    take(text_[i++]);
  }

  void tokenize() {
    auto& i = lex_.i;
    while (i < text_.size()) {
      const char c = text_[i];
      if (c == '\\' && i + 1 < text_.size()) {
        if (text_[i + 1] == '\n') {  // a continued line
          i += 2;
          ++lex_.line;
          continue;
        }
        take(c);
        take(text_[i + 1]);
        i += 2;
      } else if (c == '\'' || c == '"') {
        take_quoted(c);
      } else if (c == '$' && i + 1 < text_.size() && (text_[i + 1] == '(' || text_[i + 1] == '{')) {
        // $( ... ), $(( ... )), ${ ... }: up to the matching bracket, kept whole
        const char open = text_[i + 1];
        const int start = lex_.line;
        take(text_[i++]);
        if (!take_bracketed(open, open == '(' ? ')' : '}')) fail(start, fmt::format("unterminated ${}", open));
      } else if (c == '`') {
        fail(lex_.line, "command substitution with backquotes is not supported");
      } else if (c == '#' && !lex_.in_word) {
        while (i < text_.size() && text_[i] != '\n') ++i;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        end_word();
        ++i;
      } else if (c == '\n') {
        end_word();
        tokens_.push_back({Token::Newline, "\n", lex_.line});
        ++lex_.line;
        ++i;
      } else if (c == ';' || c == '|' || c == '&' || c == '(' || c == ')' || c == '<' || c == '>') {
        end_word();
        std::string op(1, c);
        if ((c == '|' || c == '&' || c == ';') && i + 1 < text_.size() && text_[i + 1] == c) op += text_[++i];
        tokens_.push_back({Token::Op, op, lex_.line});
        ++i;
      } else {
        take(c);
        ++i;
      }
    }
    end_word();
  }

  // ---- statements and control flow
  struct Frame {
    bool active = false;  // this branch runs
    bool done = false;    // a branch of this if ran
    bool outer = false;   // the enclosing code runs
  };
  bool active() const { return frames_.empty() || (frames_.back().active && frames_.back().outer); }

  void run() {
    std::size_t i = 0;
    while (i < tokens_.size()) {
      std::vector<Token> statement;
      while (i < tokens_.size() && tokens_[i].kind != Token::Newline &&
             !(tokens_[i].kind == Token::Op && tokens_[i].text == ";")) {
        // an array assignment's elements run on to its closing parenthesis, across lines
        if (tokens_[i].kind == Token::Op && tokens_[i].text == "(" && !statement.empty() &&
            statement.back().kind == Token::Word && statement.back().text.ends_with('=')) {
          statement.push_back(tokens_[i++]);
          while (i < tokens_.size() && !(tokens_[i].kind == Token::Op && tokens_[i].text == ")")) {
            if (tokens_[i].kind != Token::Newline) statement.push_back(tokens_[i]);
            ++i;
          }
          if (i >= tokens_.size()) fail(statement.front().line, "unterminated array: no closing )");
        }
        statement.push_back(tokens_[i++]);
      }
      if (i < tokens_.size()) ++i;
      if (!statement.empty()) line_ = statement.front().line, execute(statement);
      if (exited_) break;
    }
    if (!frames_.empty() && !exited_) fail(line_, "if without fi");
  }

  void execute(std::vector<Token> words) {
    const auto first = [&] { return words.front().kind == Token::Word ? words.front().text : std::string(); };
    // `then`, `else` and `do` may start a statement that goes on
    if (first() == "then" || first() == "else") {
      if (first() == "else") else_branch();
      words.erase(words.begin());
      if (words.empty()) return;
    }
    const auto keyword = first();
    if (keyword == "if" || keyword == "elif") {
      const bool outer = keyword == "if" ? active() : (!frames_.empty() && frames_.back().outer);
      const bool cond = outer && condition({words.begin() + 1, words.end()});
      if (keyword == "if") {
        frames_.push_back({.active = cond, .done = cond, .outer = outer});
      } else {
        if (frames_.empty()) fail(line_, "elif without if");
        auto& f = frames_.back();
        f.active = !f.done && cond;
        f.done = f.done || f.active;
      }
      return;
    }
    if (keyword == "fi") {
      if (frames_.empty()) fail(line_, "fi without if");
      frames_.pop_back();
      return;
    }
    for (const auto* unsupported : {"for", "while", "until", "case", "select", "function", "do", "done", "esac"})
      if (keyword == unsupported)
        fail(line_, fmt::format("`{}` is not supported in a launch script (variables, arrays, if [[ ]] and one "
                                "launch command are)",
                                keyword));
    if (!active()) return;
    command(words);
  }

  void else_branch() {
    if (frames_.empty()) fail(line_, "else without if");
    auto& f = frames_.back();
    f.active = !f.done;
    f.done = true;
  }

  static bool assignment(const std::string& word, std::string& name, bool& append, std::string& value) {
    std::size_t n = 0;
    while (n < word.size() && is_name_char(word[n], n == 0)) ++n;
    if (n == 0 || n >= word.size()) return false;
    append = word[n] == '+';
    const auto eq = n + (append ? 1 : 0);
    if (eq >= word.size() || word[eq] != '=') return false;
    name = word.substr(0, n);
    value = word.substr(eq + 1);
    return true;
  }

  void command(std::vector<Token>& words) {
    std::size_t k = 0;
    if (words[k].kind == Token::Word && (words[k].text == "export" || words[k].text == "readonly")) ++k;
    // assignments (before a command they are its environment: nothing here reads it)
    bool assigned = false;
    while (k < words.size() && words[k].kind == Token::Word) {
      std::string name, value;
      bool append = false;
      if (!assignment(words[k].text, name, append, value)) break;
      assigned = true;
      if (value.empty() && k + 1 < words.size() && words[k + 1].kind == Token::Op && words[k + 1].text == "(") {
        std::vector<std::string> elements;
        std::size_t j = k + 2;
        for (; j < words.size() && !(words[j].kind == Token::Op && words[j].text == ")"); ++j) {
          if (words[j].kind != Token::Word) fail(words[j].line, fmt::format("\"{}\" inside an array", words[j].text));
          strict_ = true;
          for (auto& e : expand(words[j].text, true)) elements.push_back(std::move(e));
          strict_ = false;
        }
        auto& v = variables_[name];
        if (!append) v.clear();
        v.insert(v.end(), elements.begin(), elements.end());
        k = j + 1;
      } else {
        auto v = expand(value, false);
        auto& slot = variables_[name];
        const auto text = v.empty() ? std::string() : v.front();
        if (append && !slot.empty())
          slot.front() += text;
        else
          slot = {text};
        ++k;
      }
    }
    if (k >= words.size()) return;
    if (words[k].kind != Token::Word) fail(words[k].line, fmt::format("\"{}\" is not supported here", words[k].text));
    const auto name = expand(words[k].text, false);
    const std::string program = name.empty() ? std::string() : name.front();
    if (std::find(kHarmless.begin(), kHarmless.end(), program) != kHarmless.end() ||
        (words.front().text == "export" && !assigned))
      return;
    if (program == "exit") {
      if (!launch_) fail(words[k].line, "the script exits before its launch command");
      exited_ = true;
      return;
    }
    if (program == "unset") {
      for (std::size_t j = k + 1; j < words.size(); ++j) variables_.erase(words[j].text);
      return;
    }
    if (launch_ && program.starts_with("--") && k == 0) {
      // an arguments file lists its arguments on lines of their own: they continue the launch
      for (std::size_t j = k; j < words.size(); ++j) {
        if (words[j].kind != Token::Word) fail(words[j].line, fmt::format("\"{}\" among the arguments", words[j].text));
        strict_ = true;
        for (auto& w : expand(words[j].text, true)) launch_->push_back(std::move(w));
        strict_ = false;
      }
      return;
    }
    const bool launch = program == "torchrun" || program == "python" || program == "python3" ||
                        program.ends_with(".py") || program.starts_with("--");
    if (!launch)
      fail(words[k].line, fmt::format("\"{}\" is not a command trainsim reads (a launch script may set variables and "
                                      "arrays, test them with if [[ ]], and run torchrun, python -m "
                                      "torch.distributed.run or pretrain_gpt.py once)",
                                      program));
    if (launch_) fail(words[k].line, "a second launch command: give one");
    std::vector<std::string> out;
    for (std::size_t j = k; j < words.size(); ++j) {
      if (words[j].kind != Token::Word)
        fail(words[j].line, fmt::format("\"{}\" (a pipe, redirection, list or subshell) in the launch command is "
                                        "not supported",
                                        words[j].text));
      strict_ = true;
      for (auto& w : expand(words[j].text, true)) out.push_back(std::move(w));
      strict_ = false;
    }
    launch_ = std::move(out);
  }

  // [[ ... ]] or [ ... ] tests joined by && and ||, left to right as bash runs a list.
  bool condition(const std::vector<Token>& words) {
    bool result = false;
    std::string join;
    std::size_t i = 0;
    while (i < words.size()) {
      const auto& open = words[i].text;
      if (open != "[[" && open != "[")
        fail(words[i].line, fmt::format("if on \"{}\": only [[ ]] and [ ] tests are supported", open));
      const std::string close = open == "[[" ? "]]" : "]";
      std::vector<std::string> args;
      ++i;
      while (i < words.size() && words[i].text != close) {
        if (words[i].kind != Token::Word) fail(words[i].line, fmt::format("\"{}\" inside a test", words[i].text));
        auto e = expand(words[i].text, false);
        args.push_back(e.empty() ? std::string() : e.front());
        ++i;
      }
      if (i >= words.size()) fail(words.front().line, fmt::format("{} without {}", open, close));
      ++i;
      const bool value = test(args, words.front().line);
      result = join.empty() ? value : join == "&&" ? (result && value) : (result || value);
      if (i < words.size()) {
        join = words[i].text;
        if (join != "&&" && join != "||") fail(words[i].line, fmt::format("\"{}\" after a test", join));
        ++i;
      }
    }
    return result;
  }

  bool test(std::vector<std::string> a, int line) {
    bool negate = false;
    if (!a.empty() && a.front() == "!") {
      negate = true;
      a.erase(a.begin());
    }
    bool r = false;
    if (a.size() == 1) {
      r = !a[0].empty();
    } else if (a.size() == 2 && (a[0] == "-z" || a[0] == "-n")) {
      r = a[0] == "-z" ? a[1].empty() : !a[1].empty();
    } else if (a.size() == 2 && (a[0] == "-f" || a[0] == "-d" || a[0] == "-e" || a[0] == "-x" || a[0] == "-r")) {
      r = true;  // the launch's files are taken to exist where it runs
    } else if (a.size() == 3 && (a[1] == "==" || a[1] == "=" || a[1] == "!=")) {
      if (a[2].find_first_of("*?[") != std::string::npos)
        fail(line, fmt::format("pattern \"{}\" in a test is not supported", a[2]));
      r = (a[0] == a[2]) == (a[1] != "!=");
    } else if (a.size() == 3 && a[1].size() == 3 && a[1][0] == '-') {
      const auto x = integer(a[0], line);
      const auto y = integer(a[2], line);
      const auto& op = a[1];
      if (op == "-eq")
        r = x == y;
      else if (op == "-ne")
        r = x != y;
      else if (op == "-lt")
        r = x < y;
      else if (op == "-le")
        r = x <= y;
      else if (op == "-gt")
        r = x > y;
      else if (op == "-ge")
        r = x >= y;
      else
        fail(line, fmt::format("test operator {} is not supported", op));
    } else {
      fail(line, fmt::format("test \"{}\" is not supported", fmt::join(a, " ")));
    }
    return r != negate;
  }

  std::int64_t integer(const std::string& text, int line) const {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      fail(line, fmt::format("\"{}\" is not an integer", text));
    return v;
  }

  // ---- expansion: parameters, arrays, arithmetic, quote removal, word splitting
  struct Fields {
    std::vector<std::string> done;
    std::string current;
    bool has = false;  // the current field exists (a quoted empty string makes one)
    void add(std::string_view s, bool quoted) {
      current += s;
      has = has || quoted || !s.empty();
    }
    void split_add(std::string_view s) {  // an unquoted expansion: split at blanks
      std::size_t i = 0;
      while (i < s.size()) {
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
          if (has) done.push_back(std::move(current));
          current.clear();
          has = false;
          ++i;
        } else {
          current += s[i++];
          has = true;
        }
      }
    }
    void cut() {
      if (has) done.push_back(std::move(current));
      current.clear();
      has = false;
    }
  };

  std::vector<std::string> expand(const std::string& raw, bool split) {
    Fields f;
    std::size_t i = 0;
    while (i < raw.size()) {
      const char c = raw[i];
      if (c == '\'') {
        const auto end = raw.find('\'', i + 1);
        // (the tokenizer closes every quote of a word; a default's word, cut at the first closing
        // brace whatever the quotes, can still hold an unclosed one: ${X-'a}'}, which bash takes)
        if (end == std::string::npos) fail(line_, fmt::format("an unclosed single quote in {}", raw));
        f.add(std::string_view(raw).substr(i + 1, end - i - 1), true);
        i = end + 1;
      } else if (c == '"') {
        ++i;
        f.add("", true);
        while (i < raw.size() && raw[i] != '"') {
          if (raw[i] == '\\' && i + 1 < raw.size() &&
              std::string_view("$\"\\`").find(raw[i + 1]) != std::string_view::npos) {
            f.add(std::string_view(raw).substr(i + 1, 1), true);
            i += 2;
          } else if (raw[i] == '$') {
            i = dollar(raw, i, f, true, false);
          } else {
            f.add(std::string_view(raw).substr(i++, 1), true);
          }
        }
        ++i;
      } else if (c == '\\' && i + 1 < raw.size()) {
        f.add(std::string_view(raw).substr(i + 1, 1), true);
        i += 2;
      } else if (c == '$') {
        i = dollar(raw, i, f, false, split);
      } else {
        f.add(std::string_view(raw).substr(i++, 1), false);
      }
    }
    f.cut();
    if (!split && f.done.size() > 1) {
      std::string joined = fmt::format("{}", fmt::join(f.done, " "));
      return {joined};
    }
    return f.done;
  }

  // One $ expansion at raw[i]; returns the index after it.
  std::size_t dollar(const std::string& raw, std::size_t i, Fields& f, bool quoted, bool split) {
    const auto put = [&](const std::string& s) {
      if (quoted || !split)
        f.add(s, quoted);
      else
        f.split_add(s);
    };
    if (raw.compare(i, 3, "$((") == 0) {
      int depth = 0;
      std::size_t end = i + 1;
      for (; end < raw.size(); ++end) {
        if (raw[end] == '(') ++depth;
        if (raw[end] == ')' && --depth == 0) break;
      }
      if (end >= raw.size() || raw[end - 1] != ')') fail(line_, fmt::format("{} is not supported", raw.substr(i)));
      const auto expr = raw.substr(i + 3, end - 1 - (i + 3));
      put(std::to_string(arithmetic(expr)));
      return end + 1;
    }
    if (raw.compare(i, 2, "$(") == 0)
      fail(line_, fmt::format("command substitution {} is not supported", raw.substr(i)));
    if (raw.compare(i, 2, "${") == 0) {
      const auto end = matching_brace(raw, i + 1);
      if (end == std::string::npos) fail(line_, fmt::format("an unterminated ${{ in {}", raw.substr(i)));
      const auto inner = raw.substr(i + 2, end - i - 2);
      parameter(inner, f, quoted, split);
      return end + 1;
    }
    std::size_t j = i + 1;
    if (j < raw.size() && raw[j] >= '0' && raw[j] <= '9') {
      put(value(raw.substr(j, 1)));  // positional: no arguments are given to the script
      return j + 1;
    }
    while (j < raw.size() && is_name_char(raw[j], j == i + 1)) ++j;
    if (j == i + 1) {
      if (j < raw.size() && std::string_view("@*#?$!-").find(raw[j]) != std::string_view::npos)
        fail(line_, fmt::format("special parameter ${} is not supported", raw[j]));
      f.add("$", quoted);
      return j;
    }
    put(value(raw.substr(i + 1, j - i - 1)));
    return j;
  }

  // The brace that closes the one at raw[open], or npos (inside double quotes the tokenizer does
  // not bracket ${ ... }: the word may end first).
  static std::size_t matching_brace(const std::string& raw, std::size_t open) {
    int depth = 0;
    for (std::size_t k = open; k < raw.size(); ++k) {
      if (raw[k] == '{') ++depth;
      if (raw[k] == '}' && --depth == 0) return k;
    }
    return std::string::npos;
  }

  std::string value(const std::string& name) const {
    const auto it = variables_.find(name);
    // bash passes nothing for an unset variable; in an argument that is never what was meant
    if (it == variables_.end() && strict_ && !(name[0] >= '0' && name[0] <= '9'))
      fail(line_, fmt::format("${} is not set: give it a value in the script (or write ${{{}:-DEFAULT}})", name, name));
    return it == variables_.end() || it->second.empty() ? std::string() : it->second.front();
  }

  // ${NAME}, ${NAME[@]}, ${NAME[*]}, ${NAME:-word}, ${NAME-word}, ${NAME:=word}, ${NAME=word}
  void parameter(const std::string& inner, Fields& f, bool quoted, bool split) {
    const Nested nested(*this);  // a default's word is expanded in turn
    std::size_t n = 0;
    while (n < inner.size() && (is_name_char(inner[n], n == 0) || (n == 0 && inner[n] >= '0' && inner[n] <= '9'))) ++n;
    if (n == 0) fail(line_, fmt::format("${{{}}} is not supported", inner));
    const auto name = inner.substr(0, n);
    const auto rest = inner.substr(n);
    const auto put = [&](const std::string& s) {
      if (quoted || !split)
        f.add(s, quoted);
      else
        f.split_add(s);
    };
    if (rest == "[@]" || rest == "[*]") {
      const auto it = variables_.find(name);
      const std::vector<std::string> none;
      const auto& elements = it == variables_.end() ? none : it->second;
      if (quoted && rest == "[@]") {
        // "${A[@]}": each element its own word
        for (std::size_t e = 0; e < elements.size(); ++e) {
          if (e > 0) f.cut();
          f.add(elements[e], true);
        }
        if (elements.empty() && f.current.empty()) f.has = false;
      } else {
        put(fmt::format("{}", fmt::join(elements, " ")));
      }
      return;
    }
    if (rest.empty()) {
      put(value(name));
      return;
    }
    const bool colon = rest.front() == ':';
    const auto op = rest.substr(colon ? 1 : 0, 1);
    if (op != "-" && op != "=")
      fail(line_, fmt::format("${{{}}} is not supported (${{NAME}}, ${{NAME:-default}}, ${{NAME[@]}} are)", inner));
    const auto word = rest.substr(colon ? 2 : 1);
    const auto it = variables_.find(name);
    const bool unset = it == variables_.end();
    if (unset || (colon && value(name).empty())) {
      auto d = expand(word, false);
      const auto text = d.empty() ? std::string() : d.front();
      if (op == "=") variables_[name] = {text};
      // the default's quotes were its own: a quoted default is one word
      if (word.find_first_of("\"'") != std::string::npos)
        f.add(text, true);
      else
        put(text);
    } else {
      put(value(name));
    }
  }

  // $(( )): integers with + - * / % and parentheses; names and $NAME are variables.
  std::int64_t arithmetic(const std::string& expr) {
    std::string e;
    for (std::size_t i = 0; i < expr.size();) {
      if (expr[i] == '$' || is_name_char(expr[i], true)) {
        std::size_t j = i + (expr[i] == '$' ? 1 : 0);
        if (j < expr.size() && expr[j] == '{') {
          const auto end = expr.find('}', j);
          if (end == std::string::npos) fail(line_, fmt::format("an unterminated ${{ in $(({}))", expr));
          e += value(expr.substr(j + 1, end - j - 1));
          i = end + 1;
          continue;
        }
        const auto start = j;
        while (j < expr.size() && is_name_char(expr[j], j == start)) ++j;
        const auto v = value(expr.substr(start, j - start));
        e += v.empty() ? "0" : v;
        i = j;
      } else {
        e += expr[i++];
      }
    }
    std::size_t pos = 0;
    const auto r = sum(e, pos);
    skip(e, pos);
    if (pos != e.size()) fail(line_, fmt::format("arithmetic $(({})) is not supported", expr));
    return r;
  }
  static void skip(const std::string& e, std::size_t& p) {
    while (p < e.size() && (e[p] == ' ' || e[p] == '\t')) ++p;
  }
  // 64-bit arithmetic that refuses to overflow (bash wraps; a launch argument that wrapped is no
  // value anyone meant)
  void no_overflow(bool overflowed) const {
    if (overflowed) fail(line_, "arithmetic overflow in $(( ))");
  }
  std::int64_t sum(const std::string& e, std::size_t& p) {
    auto v = product(e, p);
    for (skip(e, p); p < e.size() && (e[p] == '+' || e[p] == '-'); skip(e, p)) {
      const char op = e[p++];
      const auto w = product(e, p);
      std::int64_t r = 0;
      no_overflow(op == '+' ? __builtin_add_overflow(v, w, &r) : __builtin_sub_overflow(v, w, &r));
      v = r;
    }
    return v;
  }
  std::int64_t product(const std::string& e, std::size_t& p) {
    auto v = atom(e, p);
    for (skip(e, p); p < e.size() && (e[p] == '*' || e[p] == '/' || e[p] == '%'); skip(e, p)) {
      const char op = e[p++];
      const auto w = atom(e, p);
      if (op != '*' && w == 0) fail(line_, "division by zero in $(( ))");
      std::int64_t r = 0;
      if (op == '*') {
        no_overflow(__builtin_mul_overflow(v, w, &r));
      } else {
        no_overflow(v == std::numeric_limits<std::int64_t>::min() && w == -1);
        r = op == '/' ? v / w : v % w;
      }
      v = r;
    }
    return v;
  }
  std::int64_t atom(const std::string& e, std::size_t& p) {
    skip(e, p);
    const Nested nested(*this);
    if (p < e.size() && e[p] == '(') {
      ++p;
      const auto v = sum(e, p);
      skip(e, p);
      if (p >= e.size() || e[p] != ')') fail(line_, "unbalanced ( in $(( ))");
      ++p;
      return v;
    }
    if (p < e.size() && e[p] == '-') {
      const auto v = atom(e, ++p);
      no_overflow(v == std::numeric_limits<std::int64_t>::min());
      return -v;
    }
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(e.data() + p, e.data() + e.size(), v);
    if (ec != std::errc()) fail(line_, fmt::format("arithmetic \"{}\" is not supported", e));
    p = static_cast<std::size_t>(end - e.data());
    return v;
  }

  std::string_view text_;
  const std::string& source_;
  Lexer lex_;
  std::vector<Token> tokens_;
  std::vector<Frame> frames_;
  std::map<std::string, std::vector<std::string>, std::less<>> variables_;
  std::optional<std::vector<std::string>> launch_;
  bool exited_ = false;
  bool strict_ = false;  // expanding arguments: an array's elements or the launch command
  int line_ = 1;
  int depth_ = 0;  // nested defaults and arithmetic, bounded (see Nested)
};

}  // namespace

std::vector<std::string> launch_script_words(std::string_view text, const std::string& source) {
  return Script(text, source).launch_words();
}

}  // namespace trainsim::spec
