// Package ssim reads and writes IATA SSIM Chapter 7 schedule files and the
// rotation files that go with them. It depends on the standard library only;
// docs/ssim.md is the long form of this comment.
//
// # Reading
//
// [Read] streams a file and calls a function once per dated leg: every
// type 3 (flight leg) record is expanded into the [DatedLeg]s it stands for.
// Memory use is constant and a record costs no allocation, so a bulk import
// is bound by what the callback does. [ReadAll] collects the legs of a small
// file.
//
// Input may use LF or CRLF line ends, start with a UTF-8 byte order mark and
// contain lines of zeros (block padding) and empty lines anywhere; those are
// skipped. Every other line is a record and must be 200 bytes long.
//
// # From a record to dated legs
//
// The carrier record (type 2) gives the time mode in column 2: 'U' (UTC) or
// 'L' (local). In local mode UTC = local time − UTC/local variation
// (columns 48–52 for the departure, 66–70 for the arrival; required in that
// mode). The period of operation (columns 15–28), the days of operation
// (29–35, position i holds digit i or a blank, 1 = Monday) and the frequency
// rate (36: blank or '1' weekly, '2' every other week, counted in whole
// weeks from the Monday of the week the period starts in) select departure
// dates D in the file's time mode. For each D:
//
//   - departure = D + aircraft STD (columns 44–47; the passenger STD, 40–43,
//     when blank), converted to UTC;
//   - day of origin = D − departure date variation (column 193: blank or 0–9
//     days, 'A' or 'J' = −1);
//   - arrival = (day of origin + arrival date variation, column 194) +
//     aircraft STA (58–61; the passenger STA, 62–65, when blank), converted
//     to UTC. If column 194 is blank, the arrival is on D, or on D + 1 when
//     that would not be after the departure (producers often leave it
//     blank on overnight legs).
//
// A time of 2400 is the end of the day. Dates are DDMMMYY; two-digit years
// 00–69 are 20xx, 70–99 19xx. A period bound of 00XXX00 is open-ended: an
// open start takes the carrier record's validity-from, an open end its
// validity-to, else [Options].OpenEnd; without one the record is rejected.
// Departure and Arrival are UTC instants; an arrival that is not after the
// departure rejects the record.
//
// # Designators
//
// A flight designator, which names one dated leg in a schedule, is airline
// + flight number + suffix + departure airport + day of origin. [Designator.String] writes it as
// "LH0400/FRA/2026-03-29" or, with an operational suffix,
// "LH0400A/FRA/2026-03-29": the flight number always has four digits, so
// designators sort by flight and parse unambiguously ([ParseDesignator])
// even for airline codes ending in a digit.
//
// # Rejections
//
// A record that cannot be imported is reported as a [Rejection] (line
// number, the record's first 40 bytes, a reason naming the field, its value
// and columns) and skipped; the rest of the file is imported. With
// [Options].Strict, Read stops at the first rejection and returns it as its
// error. Rules beyond single fields:
//
//   - The first record must be a header (type 1). Otherwise the input is not
//     taken for SSIM: Read imports nothing and returns [ErrNoHeader].
//   - Type 3 and 4 records must be inside a carrier block (a type 2 record
//     and its type 5 trailer). A type 3 record's airline must be the
//     carrier's. When a carrier record is rejected, so are the records of
//     its block.
//   - A type 4 record must follow a type 3 record of the same flight and
//     itinerary variation (columns 2–11) that was not rejected.
//   - A trailer must name the carrier's airline and end in 'C' or 'E'; a
//     rejected trailer still ends its block.
//   - A block that ends without trailer (at the end of the file, or at the
//     next header or carrier record) is reported as a Rejection with an
//     empty Record; its records are imported all the same.
//   - A period in which the leg never operates is rejected.
//
// Record serial numbers, the header's content and whether periods lie within
// the carrier's validity are not checked: real files get them wrong without
// harm to the schedule.
//
// # Writing
//
// [NewWriter] writes a file in UTC time mode with one type 3 record per
// dated leg; [NewCompactWriter] groups legs into weekly and fortnightly
// patterns instead. Either way Read returns exactly the legs written apart
// from Record (the compact form may reorder them), and the writer refuses
// legs that SSIM cannot carry (see [Writer.Write]).
//
// # Rotations
//
// SSIM does not carry rotations. A rotation file is CSV (RFC 4180) with the
// header line
//
//	rotation,airline,flight_number,suffix,day_of_origin,departure_airport
//
// and one line per dated leg, e.g. "R17,LH,400,,2026-03-29,FRA": rotation
// id (any text), airline (2–3 characters), flight number (0–9999, leading
// zeros allowed), suffix (empty or one letter), day of origin (YYYY-MM-DD)
// and departure airport (3 letters) — the designator of the leg. The lines
// of a rotation list its legs in flight order. [ReadRotations] reports lines
// with a wrong field count, an invalid field or a leg already assigned as
// rejections and returns the rest; [WriteRotations] writes the format.
//
// Without a rotation file, [ChainByOnward] chains dated legs into rotations
// by the onward flight fields of their records (columns 138–146) and by the
// legs of multi-leg flights; its documentation gives the rule.
package ssim
