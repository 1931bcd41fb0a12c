"""Small, varied vendor-style datasheets written with reportlab, and what each one states.

Not the brochure generator's look: real datasheet layouts, each exercising something the
table-aware extractor must get right on documents it has never seen:

- `optical.pdf`: a transceiver with an absolute-maximum table and a recommended-operating
  table (Min / Typ / Max / Unit, a symbol and a notes column), footnote marks drawn small
  and raised next to numbers, `Gb/s`, `nm`, `dBm`, and the reach in a sentence;
- `family.pdf`: three part numbers in one table (one column each), units in the row
  labels (`(mW)`), a title block naming the family;
- `mcu.pdf`: a microcontroller's feature bullets (`Up to 180 MHz`, `512 Kbytes of Flash`,
  `1.7 V to 3.6 V`, `-40 to +85 °C`, `up to 82 I/Os`) and an electrical table whose
  conditions column states other values of the same kinds (`VDD = 3.3 V`, `TA = 25 °C`);
- `spellings.pdf`: a two-column spec list in the spellings datasheets use (`0~70℃`,
  `-40 ºC to 85 ºC`, `4.0V to 5.5V`, `25.78125 GBd`, `256 Kbytes`, `3 mW`) and text
  fields (`Form factor`, `Interface`), two label-value pairs on one row;
- `ordering.pdf`: a table whose rows are products (part number first, a field per
  column) and a spec box stating `3.3 ± 0.165 V` under its label.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FIELDS", "Expected", "write_datasheets"]

FIELDS = (
    "case temperature|operating temperature|operating temp:°C:min,max",
    "storage temperature|storage temp:°C:min,max",
    "supply voltage|supply|VCC|VDD|input voltage:V:min,max",
    "data rate:Gb/s",
    "wavelength|center wavelength:nm",
    "output power|transmit power:mW",
    "launch power|transmit power:dBm:min,max",
    "reach|link distance:km",
    "CPU clock|clock frequency:MHz:max",
    "flash|flash memory:KB",
    "SRAM:KB",
    "I/O count|I/Os:count",
    "form factor",
    "interface",
)
"""The `--field` declarations the tests extract with."""


@dataclass(frozen=True)
class Expected:
    """One fact a sample states: field, statistic, value in the field's unit, entity."""

    field: str
    statistic: str | None
    value: float | str
    entity: str | None = None
    """Set where a column names another product than the document's."""


def _font() -> str:
    """DejaVu Sans (shipped with matplotlib): it has `℃`, `º` and `λ`, Helvetica has not."""
    from pathlib import Path as _Path

    import matplotlib
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if "DejaVu" not in pdfmetrics.getRegisteredFontNames():
        ttf = _Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        pdfmetrics.registerFont(TTFont("DejaVu", str(ttf)))
    return "DejaVu"


def _canvas(path: Path, title: str) -> Any:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen.canvas import Canvas

    canvas = Canvas(str(path), pagesize=A4, invariant=1)
    canvas.setTitle(title)
    return canvas


def _cells(columns: list[int], texts: list[str]) -> list[tuple[float, str]]:
    return [(float(x), text) for x, text in zip(columns, texts, strict=True)]


def _row(canvas: Any, y: float, cells: list[tuple[float, str]], size: float = 9) -> None:
    canvas.setFont(_font(), size)
    for x, text in cells:
        canvas.drawString(x, y, text)


def _optical(folder: Path) -> dict[str, list[Expected]]:
    canvas = _canvas(folder / "optical.pdf", "XT-SFP10G-LR 10G SFP+ LR Transceiver")
    canvas.setFont("Helvetica-Bold", 20)
    canvas.drawString(50, 780, "XT-SFP10G-LR")
    canvas.setFont("Helvetica", 12)
    canvas.drawString(50, 760, "10 Gb/s SFP+ Transceiver, 1310 nm, Single-Mode")
    _row(canvas, 735, [(50, "The module reaches a link distance of 10 km over single-mode fibre.")])
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 700, "Absolute Maximum Ratings")
    cols = [50, 220, 290, 350, 410]
    _row(canvas, 680, _cells(cols, ["Parameter", "Symbol", "Min", "Max", "Unit"]))
    _row(canvas, 664, _cells(cols, ["Storage temperature", "TS", "-40", "85", "°C"]))
    _row(canvas, 648, _cells(cols, ["Supply voltage", "VCC", "-0.5", "4.0", "V"]))
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 610, "Recommended Operating Conditions")
    cols = [50, 220, 280, 330, 380, 430, 470]
    head = ["Parameter", "Symbol", "Min", "Typ", "Max", "Unit", "Notes"]
    _row(canvas, 590, _cells(cols, head))
    _row(canvas, 574, _cells(cols, ["Case operating temperature", "TC", "0", "", "", "°C", "1"]))
    max_cell = canvas.beginText(380, 574)  # `70` and a raised `2`, in one run of text
    max_cell.setFont(_font(), 9)
    max_cell.textOut("70")
    max_cell.setRise(4)
    max_cell.setFont(_font(), 5.5)
    max_cell.textOut("2")
    canvas.drawText(max_cell)
    _row(canvas, 558, _cells(cols, ["Supply voltage", "VCC", "3.135", "3.3", "3.465", "V", ""]))
    _row(canvas, 542, _cells(cols, ["Data rate", "", "", "10.3125", "", "Gb/s", ""]))
    _row(
        canvas,
        526,
        _cells(cols, ["Center wavelength", "λC", "1260", "1310", "1355", "nm", ""]),
    )
    _row(canvas, 510, _cells(cols, ["Transmit power", "PTX", "-8.2", "", "0.5", "dBm", "2"]))
    _row(canvas, 480, [(50, "1. Case temperature measured at the reference point.")], 7)
    _row(canvas, 470, [(50, "2. Average power, into single-mode fibre.")], 7)
    canvas.showPage()
    canvas.save()
    return {
        "optical.pdf": [
            Expected("storage temperature", "min", -40),
            Expected("storage temperature", "max", 85),
            Expected("case temperature", "min", 0),
            Expected("case temperature", "max", 70),
            Expected("supply voltage", "min", 3.135),
            Expected("supply voltage", "max", 3.465),
            Expected("data rate", None, 10.3125),
            Expected("wavelength", None, 1310),
            Expected("launch power", "min", -8.2),
            Expected("launch power", "max", 0.5),
            Expected("reach", None, 10),
        ]
    }


def _family(folder: Path) -> dict[str, list[Expected]]:
    canvas = _canvas(folder / "family.pdf", "")
    canvas.setFont("Helvetica-Bold", 18)
    canvas.drawString(50, 780, "LDM-850 / LDM-1310 / LDM-1550")
    canvas.setFont("Helvetica", 12)
    canvas.drawString(50, 760, "Laser Diode Modules")
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 720, "Specifications")
    cols = [50, 230, 320, 410]
    _row(canvas, 700, _cells(cols, ["Parameter", "LDM-850", "LDM-1310", "LDM-1550"]))
    _row(canvas, 684, _cells(cols, ["Wavelength (nm)", "850", "1310", "1550"]))
    _row(canvas, 668, _cells(cols, ["Output power (mW)", "10", "20", "50"]))
    _row(
        canvas,
        652,
        _cells(cols, ["Operating temperature", "-10 to 60 °C", "-10 to 60 °C", "0 to 50 °C"]),
    )
    canvas.showPage()
    canvas.save()
    parts = ("LDM-850", "LDM-1310", "LDM-1550")
    expected = []
    for part, wavelength, power, low, high in zip(
        parts, (850, 1310, 1550), (10, 20, 50), (-10, -10, 0), (60, 60, 50), strict=True
    ):
        expected += [
            Expected("wavelength", None, wavelength, part),
            Expected("output power", None, power, part),
            Expected("case temperature", "min", low, part),
            Expected("case temperature", "max", high, part),
        ]
    return {"family.pdf": expected}


def _mcu(folder: Path) -> dict[str, list[Expected]]:
    canvas = _canvas(folder / "mcu.pdf", "PDF with Fullscreen Cover and Content")
    canvas.setFont("Helvetica-Bold", 22)
    canvas.drawString(50, 780, "QX32F407")
    canvas.setFont("Helvetica", 12)
    canvas.drawString(50, 760, "32-bit Arm Cortex-M4 microcontroller")
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 730, "Features")
    bullets = [
        "• Core: Arm Cortex-M4 with FPU, up to 180 MHz CPU clock",
        "• 512 Kbytes of Flash memory and 128 KB of SRAM",
        "• 1.7 V to 3.6 V supply; -40 to +85 °C operating temperature",
        "• Up to 82 I/Os with interrupt capability",
    ]
    for i, line in enumerate(bullets):
        _row(canvas, 712 - 15 * i, [(60, line)], 10)
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 630, "Electrical characteristics")
    cols = [50, 170, 215, 340, 385, 430, 475]
    _row(
        canvas,
        610,
        _cells(cols, ["Parameter", "Symbol", "Conditions", "Min", "Typ", "Max", "Unit"]),
    )
    _row(
        canvas,
        594,
        _cells(cols, ["Supply current", "IDD", "VDD = 3.3 V, TA = 25 °C", "", "38", "45", "mA"]),
    )
    _row(
        canvas,
        578,
        _cells(cols, ["Input high voltage", "VIH", "VDD = 3.3 V", "2.0", "", "", "V"]),
    )
    canvas.showPage()
    canvas.save()
    return {
        "mcu.pdf": [
            Expected("CPU clock", "max", 180),
            Expected("flash", None, 512),
            Expected("SRAM", None, 128),
            Expected("supply voltage", "min", 1.7),
            Expected("supply voltage", "max", 3.6),
            Expected("case temperature", "min", -40),
            Expected("case temperature", "max", 85),
            Expected("I/O count", None, 82),
        ]
    }


def _spellings(folder: Path) -> dict[str, list[Expected]]:
    canvas = _canvas(folder / "spellings.pdf", "QS28-ER4 Product Specification")
    canvas.setFont("Helvetica-Bold", 16)
    canvas.drawString(50, 780, "QS28-ER4")
    canvas.setFont("Helvetica", 11)
    canvas.drawString(50, 762, "100G QSFP28 ER4 optical transceiver")
    rows = [
        ("Operating temp.", "0~70℃", "Form factor", "QSFP28"),
        ("Storage temp", "-40 ºC to 85 ºC", "Interface", "I2C"),
        ("Input voltage", "4.0V to 5.5V", "", ""),
        ("Data rate", "25.78125 GBd", "", ""),
        ("Memory", "256 Kbytes", "", ""),
        ("Output power", "3 mW", "", ""),
    ]
    for i, (a, b, c, d) in enumerate(rows):
        _row(canvas, 720 - 16 * i, [(50, a), (160, b), (300, c), (400, d)])
    canvas.showPage()
    canvas.save()
    return {
        "spellings.pdf": [
            Expected("case temperature", "min", 0),
            Expected("case temperature", "max", 70),
            Expected("storage temperature", "min", -40),
            Expected("storage temperature", "max", 85),
            Expected("supply voltage", "min", 4.0),
            Expected("supply voltage", "max", 5.5),
            Expected("data rate", None, 25.78125),
            Expected("output power", None, 3),
            Expected("form factor", None, "QSFP28"),
            Expected("interface", None, "I2C"),
        ]
    }


def _ordering(folder: Path) -> dict[str, list[Expected]]:
    canvas = _canvas(folder / "ordering.pdf", "")
    canvas.setFont("Helvetica-Bold", 18)
    canvas.drawString(50, 780, "AQ-400 Series")
    _row(canvas, 740, [(50, "Supply voltage")], 10)  # a spec box: the value on the next line
    _row(canvas, 726, [(50, "3.3 ± 0.165 V")], 10)
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(50, 690, "Ordering information")
    cols = [50, 150, 240, 330, 400]
    head = ["Part number", "Data rate", "Wavelength", "Reach", "Case temperature"]
    _row(canvas, 670, _cells(cols, head))
    _row(canvas, 654, _cells(cols, ["AQ-410", "10.3 Gb/s", "1310 nm", "10 km", "0 to 70 °C"]))
    _row(canvas, 638, _cells(cols, ["AQ-440", "10.3 Gb/s", "1550 nm", "40 km", "-40 to 85 °C"]))
    canvas.showPage()
    canvas.save()
    expected = [Expected("supply voltage", "min", 3.135), Expected("supply voltage", "max", 3.465)]
    for part, wavelength, reach, low, high in (
        ("AQ-410", 1310, 10, 0, 70),
        ("AQ-440", 1550, 40, -40, 85),
    ):
        expected += [
            Expected("data rate", None, 10.3, part),
            Expected("wavelength", None, wavelength, part),
            Expected("reach", None, reach, part),
            Expected("case temperature", "min", low, part),
            Expected("case temperature", "max", high, part),
        ]
    return {"ordering.pdf": expected}


def write_datasheets(folder: Path) -> dict[str, list[Expected]]:
    """Write the samples into `folder`; file name -> what each states."""
    folder.mkdir(parents=True, exist_ok=True)
    expected: dict[str, list[Expected]] = {}
    for write in (_optical, _family, _mcu, _spellings, _ordering):
        expected.update(write(folder))
    return expected
