// SPDX-License-Identifier: Apache-2.0
#include "Timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "Holds.h"

namespace dlock::nemesis {
namespace {

constexpr double kLeft = 140;       // room for the key names
constexpr double kWidth = 1400;     // the time axis
constexpr double kTop = 40;         // room for the fault names
constexpr double kRowHeight = 14;
constexpr double kLaneGap = 16;

std::string escapeXml(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

}  // namespace

std::string timelineSvg(const std::vector<Op>& history) {
  std::int64_t begin = INT64_MAX;
  std::int64_t end = INT64_MIN;
  for (const Op& op : history) {
    begin = std::min(begin, op.timeNs);
    end = std::max(end, op.timeNs);
  }
  if (history.empty()) begin = end = 0;
  const double span = std::max<double>(1.0, static_cast<double>(end - begin));
  const auto x = [&](std::int64_t ns) { return kLeft + kWidth * static_cast<double>(ns - begin) / span; };

  // Colours by client, in name order; rows within each key's lane by greedy interval packing.
  std::map<std::string, int> colour;
  for (const Op& op : history) {
    if (op.process != "nemesis") colour.emplace(op.process, 0);
  }
  int index = 0;
  for (auto& [process, hue] : colour) hue = (index++ * 137) % 360;

  std::vector<Hold> holds = extractHolds(history);
  std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) { return a.acquireOkNs < b.acquireOkNs; });
  std::map<std::string, std::vector<std::int64_t>> rowsEnd;  // per key: each row's last end
  std::vector<std::size_t> rowOf(holds.size());
  for (std::size_t i = 0; i < holds.size(); ++i) {
    auto& rows = rowsEnd[holds[i].key];
    std::size_t row = 0;
    while (row < rows.size() && rows[row] > holds[i].acquireOkNs) ++row;
    if (row == rows.size()) rows.push_back(0);
    rows[row] = holds[i].sectionEndNs;
    rowOf[i] = row;
  }
  for (const Op& op : history) {
    if (!op.key.empty() && op.process != "nemesis" && (op.op == "acquire" || op.op == "lost")) rowsEnd[op.key];
  }
  std::map<std::string, double> laneTop;
  double y = kTop;
  for (const auto& [key, rows] : rowsEnd) {
    laneTop[key] = y;
    y += static_cast<double>(std::max<std::size_t>(1, rows.size())) * kRowHeight + kLaneGap;
  }
  const double bottom = y;
  const double height = bottom + 50;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(kLeft + kWidth + 40) << "\" height=\""
      << number(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";

  // Fault windows under everything else.
  std::vector<std::pair<const Op*, const Op*>> windows;
  for (const Op& op : history) {
    if (op.process == "nemesis" && op.op == "fault-start") windows.emplace_back(&op, nullptr);
    if (op.process == "nemesis" && op.op == "fault-end") {
      for (auto it = windows.rbegin(); it != windows.rend(); ++it) {
        if (it->second == nullptr && it->first->value == op.value && it->first->key == op.key) {
          it->second = &op;
          break;
        }
      }
    }
  }
  int faultRow = 0;
  for (const auto& [start, stop] : windows) {
    const double x0 = x(start->timeNs);
    const double x1 = x(stop != nullptr ? stop->timeNs : end);
    const std::string name = start->value + (start->key.empty() ? "" : " " + start->key);
    svg << "<rect x=\"" << number(x0) << "\" y=\"" << number(kTop - 6) << "\" width=\"" << number(std::max(1.0, x1 - x0))
        << "\" height=\"" << number(bottom - kTop) << "\" fill=\"#888\" fill-opacity=\"0.18\"><title>"
        << escapeXml(name) << "</title></rect>\n"
        << "<text x=\"" << number(x0 + 2) << "\" y=\"" << number(14 + 12 * (faultRow++ % 2)) << "\" fill=\"#555\">"
        << escapeXml(name) << "</text>\n";
  }

  for (const auto& [key, top] : laneTop) {
    svg << "<text x=\"4\" y=\"" << number(top + 11) << "\">" << escapeXml(key) << "</text>\n"
        << "<line x1=\"" << number(kLeft) << "\" x2=\"" << number(kLeft + kWidth) << "\" y1=\"" << number(top - 3)
        << "\" y2=\"" << number(top - 3) << "\" stroke=\"#ddd\"/>\n";
  }

  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& hold = holds[i];
    const double top = laneTop[hold.key] + static_cast<double>(rowOf[i]) * kRowHeight;
    const double x0 = x(hold.acquireOkNs);
    const double x1 = x(hold.sectionEndNs);
    const bool died = !hold.releaseEndNs;
    svg << "<rect x=\"" << number(x0) << "\" y=\"" << number(top) << "\" width=\"" << number(std::max(1.0, x1 - x0))
        << "\" height=\"" << number(kRowHeight - 3) << "\" fill=\"hsl(" << colour[hold.process] << ",65%,55%)\""
        << (died ? " stroke=\"black\" stroke-dasharray=\"2,2\"" : "") << "><title>" << escapeXml(hold.process)
        << " token " << hold.token << " release " << escapeXml(hold.releaseOutcome.empty() ? "none" : hold.releaseOutcome)
        << "</title></rect>\n";
    if (hold.endNs > hold.sectionEndNs) {  // the release's round trip, as a thin tail
      svg << "<line x1=\"" << number(x1) << "\" x2=\"" << number(x(hold.endNs)) << "\" y1=\"" << number(top + 5)
          << "\" y2=\"" << number(top + 5) << "\" stroke=\"hsl(" << colour[hold.process] << ",65%,40%)\"/>\n";
    }
    if (hold.releaseOutcome == "LockLostError") {
      svg << "<text x=\"" << number(x1 - 4) << "\" y=\"" << number(top + 10) << "\" fill=\"#c00\">✕</text>\n";
    }
  }

  // Lost notices: a red triangle on the key's lane.
  for (const Op& op : history) {
    if (op.op != "lost" || laneTop.count(op.key) == 0) continue;
    const double px = x(op.timeNs);
    const double top = laneTop[op.key];
    svg << "<path d=\"M" << number(px - 4) << " " << number(top - 3) << " L" << number(px + 4) << " " << number(top - 3)
        << " L" << number(px) << " " << number(top + 5) << " Z\" fill=\"#c00\"><title>lost notice "
        << escapeXml(op.process) << " token " << op.token << "</title></path>\n";
  }

  // The axis: a tick every 1, 2, 5, 10... seconds, at most ~20.
  const double seconds = span / 1e9;
  double step = 1;
  for (const double candidate : {0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0}) {
    step = candidate;
    if (seconds / candidate <= 20) break;
  }
  svg << "<line x1=\"" << number(kLeft) << "\" x2=\"" << number(kLeft + kWidth) << "\" y1=\"" << number(bottom)
      << "\" y2=\"" << number(bottom) << "\" stroke=\"black\"/>\n";
  for (double t = 0; t <= seconds + 1e-9; t += step) {
    const double px = kLeft + kWidth * t / seconds;
    svg << "<line x1=\"" << number(px) << "\" x2=\"" << number(px) << "\" y1=\"" << number(bottom) << "\" y2=\""
        << number(bottom + 5) << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << number(px) << "\" y=\"" << number(bottom + 18) << "\" text-anchor=\"middle\">"
        << number(t) << "</text>\n";
  }
  svg << "<text x=\"" << number(kLeft + kWidth / 2) << "\" y=\"" << number(bottom + 36)
      << "\" text-anchor=\"middle\">seconds</text>\n</svg>\n";
  return svg.str();
}

void writeTimeline(const std::string& path, const std::vector<Op>& history) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << timelineSvg(history);
  if (!out) throw std::runtime_error("timeline: cannot write " + path);
}

}  // namespace dlock::nemesis
