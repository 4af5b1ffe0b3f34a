/**
 * Place names, for one purpose: a customer naming a place the knowledge base never mentions ("do you ship to
 * australia", "roaming in florida?") is asking about where, not about something off-topic. Such a name is no
 * evidence against an answer (it carries no weight in the confidence measure, like a number), and a country also
 * stands for the knowledge base's own word for "abroad" when it has one. World knowledge only — countries,
 * large cities and regions — with no domain vocabulary. Multi-word names are matched word by word on their
 * distinctive word ("zealand", "emirates").
 */
import { normalize, stem } from './text.js';

const COUNTRIES = `afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan bahamas
bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil brunei bulgaria burkina
burundi cambodia cameroon canada    colombia comoros congo croatia cuba cyprus czechia czech denmark
djibouti dominica ecuador egypt eritrea estonia eswatini ethiopia fiji finland france gabon gambia  germany
ghana greece grenada guatemala  guyana haiti honduras hungary iceland india indonesia iran iraq ireland israel
italy jamaica japan  kazakhstan kenya kiribati kosovo kuwait kyrgyzstan laos latvia lebanon lesotho liberia
libya liechtenstein lithuania luxembourg madagascar malawi malaysia maldives  malta mauritania mauritius mexico
micronesia moldova monaco mongolia montenegro morocco mozambique myanmar namibia nauru nepal netherlands holland
zealand nicaragua  nigeria macedonia norway oman pakistan palau palestine panama paraguay peru philippines
poland portugal qatar romania russia rwanda samoa sanmarino senegal serbia seychelles singapore slovakia slovenia
somalia spain lanka sudan suriname sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga trinidad
tunisia  turkmenistan tuvalu uganda ukraine emirates uruguay uzbekistan vanuatu venezuela vietnam yemen zambia
zimbabwe scotland wales england britain uk usa america caribbean europe asia africa oceania scandinavia balkans
hawaii alaska puerto guam bermuda greenland  guernsey gibraltar`;

// Names that are also everyday words (turkey, china, chad, guinea…) are left out or kept only as places, so they
// never stand for "abroad".
const REGIONS_AND_CITIES = `georgia jordan chile jersey alabama arizona arkansas california colorado connecticut delaware florida idaho illinois
indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota mississippi missouri montana
nebraska nevada hampshire mexico carolina dakota ohio oklahoma oregon pennsylvania rhode tennessee texas utah vermont
virginia washington wisconsin wyoming ontario quebec alberta manitoba saskatchewan nova scotia newfoundland
yukon nunavut tasmania queensland victoria bavaria catalonia andalusia tuscany sicily sardinia brittany normandy
provence corsica ulster cornwall devon yorkshire kent surrey essex london manchester birmingham liverpool leeds
glasgow edinburgh cardiff belfast bristol newcastle sheffield nottingham leicester brighton cambridge aberdeen
inverness dundee york dublin galway paris lyon marseille toulouse bordeaux lille berlin munich hamburg
frankfurt cologne stuttgart vienna zurich geneva basel amsterdam rotterdam brussels antwerp luxembourg copenhagen
stockholm oslo helsinki reykjavik madrid barcelona valencia seville malaga lisbon porto rome milan naples florence
venice turin athens istanbul warsaw krakow prague budapest bucharest sofia zagreb belgrade moscow kyiv kiev riga
tallinn vilnius dubai doha cairo marrakech lagos nairobi johannesburg capetown tokyo osaka kyoto seoul beijing
shanghai hongkong bangkok singapore manila jakarta bali delhi mumbai bangalore karachi sydney melbourne brisbane
perth adelaide auckland wellington toronto montreal vancouver calgary ottawa edmonton winnipeg halifax york boston
chicago houston dallas austin phoenix philadelphia denver seattle portland miami orlando atlanta detroit
minneapolis vegas angeles francisco diego nashville memphis orleans baltimore pittsburgh cleveland honolulu anchorage
havana cancun lima bogota santiago buenos aires rio paulo caracas quito montevideo`;

function stems(list: string): Set<string> {
  return new Set(list.split(/\s+/).filter(Boolean).map((w) => stem(normalize(w))));
}

const COUNTRY_STEMS = stems(COUNTRIES);
const PLACE_STEMS = new Set([...COUNTRY_STEMS, ...stems(REGIONS_AND_CITIES)]);

/** The analysed term is (the distinctive word of) a place name. */
export function isPlaceStem(term: string): boolean {
  return PLACE_STEMS.has(term);
}

/** The analysed term is (the distinctive word of) a country or a region larger than one. */
export function isCountryStem(term: string): boolean {
  return COUNTRY_STEMS.has(term);
}
