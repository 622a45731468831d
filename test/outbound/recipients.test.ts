/** Recipient entries (effects/outbound/recipients.ts): the two written forms, and what is refused. */
import { describe, expect, it } from "vitest"
import { isRecipient, parseRecipient } from "../../effects/outbound/recipients.ts"

describe("parseRecipient", () => {
  it.each<[string, { email: string; name?: string }]>([
    ["asha@dest.example", { email: "asha@dest.example" }],
    ["  asha@dest.example  ", { email: "asha@dest.example" }],
    ["Bob Mrema <bob@dest.example>", { email: "bob@dest.example", name: "Bob Mrema" }],
    ["<bob@dest.example>", { email: "bob@dest.example" }],
    [`"Neema, Ops" <neema@dest.example>`, { email: "neema@dest.example", name: "Neema, Ops" }],
    [`"Juma \\"JJ\\" Mrisho" <juma@dest.example>`, { email: "juma@dest.example", name: `Juma "JJ" Mrisho` }],
    ["Zawadi Mushi   <Zawadi.Mushi@Dest.Example>", { email: "Zawadi.Mushi@Dest.Example", name: "Zawadi Mushi" }],
    ["Ämä Öztürk <ama@dest.example>", { email: "ama@dest.example", name: "Ämä Öztürk" }],
    ["Asha+orders@dest.example", { email: "Asha+orders@dest.example" }],
  ])("reads %j", (input, expected) => {
    expect(parseRecipient(input)).toEqual(expected)
    expect(isRecipient(input)).toBe(true)
  })

  it.each([
    ["empty", ""],
    ["no @", "not-an-email"],
    ["two @", "c@@dest"],
    ["no domain", "Asha <asha>"],
    ["angle brackets left open", "Asha <asha@dest.example"],
    ["text after the address", "Asha <asha@dest.example> extra"],
    ["doubled brackets", "Asha <<asha@dest.example>>"],
    ["two addresses in one entry", "a@dest.example, b@dest.example"],
    ["two bracketed addresses", "<a@dest.example> <b@dest.example>"],
    ["a group", "team: a@dest.example, b@dest.example;"],
    ["a header injection", "x@dest.example\r\nBcc: victim@dest.example"],
    ["a control character in the name", "Asha\u0007 <asha@dest.example>"],
    ["a single-label domain", "asha@localhost"],
    ["an address over 254 characters", `${"a".repeat(250)}@dest.example`],
    ["an entry over 512 characters", `${"N".repeat(500)} <asha@dest.example>`],
  ])("refuses %s", (_, input) => {
    expect(parseRecipient(input)).toBeUndefined()
    expect(isRecipient(input)).toBe(false)
  })
})
