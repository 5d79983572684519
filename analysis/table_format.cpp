#include "analysis/table_format.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

// Markdown column names: the group label joined to the column ("MT-bench speedup").
std::vector<std::string> flat_columns(const Table& t) {
  std::vector<std::string> out = t.columns;
  size_t col = 0;
  for (const auto& [label, span] : t.groups) {
    for (int k = 0; k < span && col < out.size(); ++k, ++col)
      if (!label.empty()) out[col] = label + " " + out[col];
  }
  return out;
}

std::string md_cell(const Cell& c) {
  std::string text;
  for (char ch : c.text) text += ch == '|' ? std::string("\\|") : std::string(1, ch);
  if (c.bold && !text.empty()) return "**" + text + "**";
  return text;
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::ostringstream s;
  s << "### " << report.heading << "\n\n";
  for (const Table& t : report.tables) {
    if (!t.title.empty()) s << "**" << t.title << "**\n\n";
    const std::vector<std::string> cols = flat_columns(t);
    s << "|";
    for (const std::string& c : cols) s << " " << c << " |";
    s << "\n|";
    for (size_t i = 0; i < cols.size(); ++i) s << " --- |";
    s << "\n";
    for (const auto& row : t.rows) {
      s << "|";
      for (const Cell& c : row) s << " " << md_cell(c) << " |";
      s << "\n";
    }
    s << "\n";
    for (const std::string& n : t.notes) s << n << "\n\n";
  }
  s << "_" << report.caption << "_\n";
  return s.str();
}

namespace {

// Characters, not bytes: UTF-8 continuation bytes do not take a column.
size_t display_width(const std::string& text) {
  size_t n = 0;
  for (unsigned char ch : text) n += (ch & 0xC0) != 0x80;
  return n;
}

// "1.52x", "-0.3", "98.5%", "1/1" (a trailing '*' or alignment space aside): right-aligned in text tables.
bool looks_numeric(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '*')) text.pop_back();
  return !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' || text[0] == '+') &&
         text.find(' ') == std::string::npos;
}

}  // namespace

std::string render_text(const Table& t) {
  const std::vector<std::string> cols = flat_columns(t);
  // A row with several bold cells (the best grid point) gets one '*' after the line; a single bold cell gets its
  // own '*', and the other cells of its column a trailing space there, so numbers stay aligned.
  auto whole_row_bold = [](const std::vector<Cell>& row) {
    return std::count_if(row.begin(), row.end(), [](const Cell& c) { return c.bold; }) >= 2;
  };
  std::vector<bool> has_bold(cols.size(), false);
  for (const auto& row : t.rows)
    if (!whole_row_bold(row))
      for (size_t i = 0; i < row.size() && i < cols.size(); ++i) has_bold[i] = has_bold[i] || row[i].bold;
  std::vector<std::vector<std::string>> cells{cols};
  std::vector<bool> row_mark{false};
  for (const auto& row : t.rows) {
    const bool whole = whole_row_bold(row);
    std::vector<std::string> r;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool mark = row[i].bold && !whole;
      r.push_back(mark ? row[i].text + "*" : i < cols.size() && has_bold[i] ? row[i].text + " " : row[i].text);
    }
    cells.push_back(r);
    row_mark.push_back(whole);
  }
  std::vector<size_t> width(cols.size(), 0);
  for (const auto& r : cells)
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  std::ostringstream s;
  if (!t.title.empty()) s << t.title << "\n";
  for (size_t k = 0; k < cells.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < cells[k].size() && i < width.size(); ++i) {
      const std::string& c = cells[k][i];
      const std::string pad(width[i] - display_width(c), ' ');
      const bool right = k > 0 && i > 0 && looks_numeric(c);  // the header and the label column stay left
      line += (i ? "  " : "") + (right ? pad + c : c + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s << line << (row_mark[k] ? "  *" : "") << "\n";
  }
  for (const std::string& n : t.notes) s << n << "\n";
  return s.str();
}

std::string render_text(const Report& report) {
  std::string s = report.heading + "\n\n";
  for (const Table& t : report.tables) s += render_text(t) + "\n";
  return s + report.caption + "\n";
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    // UTF-8 sequences of the symbols the tables use.
    if (text.compare(i, 2, "τ") == 0) { out += "$\\tau$"; ++i; continue; }
    if (text.compare(i, 2, "α") == 0) { out += "$\\alpha$"; ++i; continue; }
    if (text.compare(i, 2, "×") == 0) { out += "$\\times$"; ++i; continue; }
    if (text.compare(i, 2, "±") == 0) { out += "$\\pm$"; ++i; continue; }
    if (text.compare(i, 3, "–") == 0) { out += "--"; i += 2; continue; }
    if (text.compare(i, 3, "—") == 0) { out += "---"; i += 2; continue; }
    if (text.compare(i, 3, "←") == 0) { out += "$\\leftarrow$"; i += 2; continue; }
    switch (ch) {
      case '_': case '%': case '&': case '#': case '$': case '{': case '}': out += '\\'; out += ch; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '\\': out += "\\textbackslash{}"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string render_latex(const Report& report) {
  std::ostringstream s;
  s << "% " << latex_escape(report.heading) << "\n";
  for (const Table& t : report.tables) {
    s << "\\begin{table}[t]\n\\centering\n";
    s << "\\begin{tabular}{l" << std::string(t.columns.size() > 0 ? t.columns.size() - 1 : 0, 'c') << "}\n\\toprule\n";
    if (!t.title.empty())
      s << "\\multicolumn{" << t.columns.size() << "}{c}{" << latex_escape(t.title) << "} \\\\\n\\midrule\n";
    if (!t.groups.empty()) {
      bool first = true;
      for (const auto& [label, span] : t.groups) {
        if (!first) s << " & ";
        first = false;
        if (span == 1) s << latex_escape(label);
        else s << "\\multicolumn{" << span << "}{c}{" << latex_escape(label) << "}";
      }
      s << " \\\\\n";
    }
    for (size_t i = 0; i < t.columns.size(); ++i) s << (i ? " & " : "") << latex_escape(t.columns[i]);
    s << " \\\\\n\\midrule\n";
    for (const auto& row : t.rows) {
      for (size_t i = 0; i < row.size(); ++i) {
        const std::string cell = latex_escape(row[i].text);
        s << (i ? " & " : "") << (row[i].bold && !cell.empty() ? "\\textbf{" + cell + "}" : cell);
      }
      s << " \\\\\n";
    }
    s << "\\bottomrule\n\\end{tabular}\n";
    std::string caption = report.heading + ". " + report.caption;
    for (const std::string& n : t.notes) caption += " " + n;
    s << "\\caption{" << latex_escape(caption) << "}\n\\end{table}\n\n";
  }
  return s.str();
}

void check_format(const std::string& format) {
  if (format != "md" && format != "latex" && format != "text")
    throw Error("--format: expected md, latex or text, got " + format);
}

std::string render(const Report& report, const std::string& format) {
  check_format(format);
  return format == "md" ? render_markdown(report) : format == "latex" ? render_latex(report) : render_text(report);
}

}  // namespace draftlab::analysis
