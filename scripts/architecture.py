#!/usr/bin/env python3
"""Draws docs/architecture.svg: pucl's data flow and the module that owns each step.

Algorithm 1 (learning) on top, deployment below. Plain SVG, no dependencies:
    python3 scripts/architecture.py [OUT.svg]
"""
import sys
from pathlib import Path

W, H = 1150, 640
# name -> (x, y, width, height, title, owner, fill)
BOXES = {
    "topics": (30, 60, 170, 70, "ROS topics", "ee_pose, applied_twist", "#eeeeee"),
    "demos": (30, 200, 170, 80, "demonstrations D", "demos/ (files, recorder)", "#dbeafe"),
    "filter_step": (260, 60, 190, 80, "policy filter", "learn/ (Algorithm 1 loop)", "#fef3c7"),
    "label": (260, 200, 190, 80, "identify R", "learn/labeller, learn/identify", "#fef3c7"),
    "memory": (260, 330, 190, 60, "memory buffer M", "learn/ (Algorithm 1 loop)", "#fef3c7"),
    "zeta": (520, 200, 170, 80, "train zeta", "learn/network", "#fde68a"),
    "policy": (760, 200, 190, 80, "policy proposes", "learn/proposer; policy/", "#fef3c7"),
    "rollouts": (760, 60, 190, 80, "rollouts", "task/sim (simulator, reward)", "#dcfce7"),
    "model": (520, 450, 170, 80, "model file", "deploy/model", "#e9d5ff"),
    "server": (760, 400, 190, 70, "constraint_server", "src/bin, ros/ (query, markers)", "#eeeeee"),
    "safety": (760, 520, 190, 80, "safety filter", "deploy/filter; policy/reference", "#e9d5ff"),
    "report": (30, 450, 170, 80, "metrics, pictures", "report/ (evaluate, plot)", "#dcfce7"),
    "robot": (1040, 520, 100, 80, "arm", "kinematic_sim", "#eeeeee"),
}
# (from, to, label, from side, to side)
ARROWS = [
    ("topics", "demos", "demo_recorder", "bottom", "top"),
    ("demos", "label", "D", "right", "left"),
    ("rollouts", "filter_step", "", "left", "right"),
    ("filter_step", "label", "kept", "bottom", "top"),
    ("label", "zeta", "R", "right", "left"),
    ("label", "memory", "save R", "bottom", "top"),
    ("memory", "zeta", "M", "right", "bottom@0.2"),
    ("zeta", "policy", "zeta", "right", "left"),
    ("policy", "rollouts", "", "top", "bottom"),
    ("zeta", "model", "learned", "bottom", "top"),
    ("model", "server", "", "right", "left"),
    ("model", "safety", "", "right", "left"),
    ("model", "report", "", "left", "right"),
    ("safety", "robot", "cmd_vel_out", "right", "left"),
]


def anchor(name, side):
    """A point on a box's side; "bottom@0.2" is a fifth of the way along the bottom."""
    side, _, at = side.partition("@")
    f = float(at) if at else 0.5
    x, y, w, h = BOXES[name][:4]
    return {
        "left": (x, y + h * f),
        "right": (x + w, y + h * f),
        "top": (x + w * f, y),
        "bottom": (x + w * f, y + h),
    }[side]


def esc(t):
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg():
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Arial, sans-serif">',
        '<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#333"/></marker></defs>',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        '<text x="240" y="30" font-size="18" font-weight="bold">Learning: Algorithm 1, '
        "repeated until R stops growing</text>",
        '<rect x="240" y="42" width="730" height="362" fill="none" stroke="#b45309" '
        'stroke-dasharray="6,4" rx="10"/>',
        '<text x="240" y="440" font-size="18" font-weight="bold">Deployment</text>',
    ]
    for x, y, w, h, title, owner, fill in BOXES.values():
        out.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" '
            'stroke="#333"/>'
        )
        out.append(
            f'<text x="{x + w / 2}" y="{y + h / 2 - 6}" font-size="15" '
            f'text-anchor="middle" font-weight="bold">{esc(title)}</text>'
        )
        out.append(
            f'<text x="{x + w / 2}" y="{y + h / 2 + 16}" font-size="11.5" '
            f'text-anchor="middle" fill="#444">{esc(owner)}</text>'
        )
    for a, b, label, sa, sb in ARROWS:
        (x1, y1), (x2, y2) = anchor(a, sa), anchor(b, sb)
        sa, sb = sa.partition("@")[0], sb.partition("@")[0]
        corner = None
        if sa in ("left", "right") and sb in ("top", "bottom"):
            path = f"M{x1},{y1} L{x2},{y1} L{x2},{y2}"  # elbow
            corner = (x2, y1)
        elif (sa, sb) == ("right", "left") and abs(y1 - y2) > 1:
            mx = (x1 + x2) / 2
            path = f"M{x1},{y1} L{mx},{y1} L{mx},{y2} L{x2},{y2}"
        else:
            path = f"M{x1},{y1} L{x2},{y2}"
        out.append(
            f'<path d="{path}" fill="none" stroke="#333" stroke-width="1.6" '
            'marker-end="url(#a)"/>'
        )
        if label:
            lx, ly = (x1 + x2) / 2, (y1 + y2) / 2
            if corner:
                lx, ly = corner[0] + 8, corner[1] - 6
                anchor_attr = "start"
            elif sa in ("top", "bottom") and sb in ("top", "bottom"):
                lx += 8
                anchor_attr = "start"
            else:
                ly -= 6
                anchor_attr = "middle"
            out.append(
                f'<text x="{lx}" y="{ly}" font-size="12" text-anchor="{anchor_attr}" '
                f'fill="#b45309">{esc(label)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    root = Path(__file__).resolve().parent.parent
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "docs" / "architecture.svg"
    tmp = target.with_suffix(".svg.tmp")
    tmp.write_text(svg())
    tmp.replace(target)  # atomic
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
